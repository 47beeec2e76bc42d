// Retention at volume: `jobs` finished jobs pushed through in simulated days, with retention on
// (the store's prune batches and partition upkeep after every chunk, old partitions archived) or
// off, then the claim cost against 10k pending jobs and the sizes of jobs, job_events and
// job_outcomes with their indexes. The jobs are written set-based, one statement per chunk, each
// finished job as the claim and completion statements leave it: a completed row, its
// enqueued/claimed/completed events and its result, all stamped at the simulated time.

#include <algorithm>
#include <filesystem>
#include <pqxx/pqxx>

#include "common/ops/retention_store.hpp"
#include "common/store/assignment_store.hpp"
#include "common/store/pg_time.hpp"
#include "drills/bench.d/bench.hpp"

namespace aclaim::drills {

namespace {

constexpr std::int64_t kOrg = 950;
constexpr base::Duration kLease = 60 * base::kSeconds;

/// One chunk of finished jobs completed over [from, from + span), evenly spread.
void push_chunk(pqxx::connection& conn, int n, base::Instant from, base::Duration span) {
    pqxx::work txn(conn, "bench_retention_chunk");
    txn.exec_params(R"SQL(
WITH j AS (
    INSERT INTO jobs (org_id, state, enqueued_at, run_at, payload, generation, assignee,
                      claimed_at, attempts, completed_at, result_ref)
    SELECT $1, 'completed', t, t, 'bench', 1, 'w', t, 1, t, 'ref'
      FROM (SELECT aclaim_ts($2::bigint + g * $4::bigint / $3::bigint) AS t
              FROM generate_series(0, $3::int - 1) g) s
    RETURNING id, org_id, queue, completed_at
), e AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, detail)
    SELECT j.id, j.org_id, k.generation, k.kind, k.worker, j.completed_at, k.detail
      FROM j CROSS JOIN (VALUES ('enqueued', 0, NULL, 'queue default'), ('claimed', 1, 'w', ''),
                                ('completed', 1, 'w', 'ref')) AS k(kind, generation, worker, detail)
)
INSERT INTO job_outcomes (org_id, job_id, outcome, queue, generation, attempts, result_ref, at)
SELECT org_id, id, 'completed', queue, 1, 1, 'ref', completed_at FROM j
)SQL",
                    kOrg, from, n, span.count());
    txn.commit();
}

std::pair<double, double> mean_p99(std::vector<double> ms) {
    if (ms.empty()) return {0, 0};
    std::sort(ms.begin(), ms.end());
    double sum = 0;
    for (double v : ms) sum += v;
    return {sum / static_cast<double>(ms.size()), ms[ms.size() * 99 / 100]};
}

}  // namespace

nlohmann::json run_retention(const RetentionBenchOptions& o) {
    auto conn = std::make_unique<pqxx::connection>(o.dsn);
    store::AssignmentStore store(o.dsn);
    const base::Duration day = std::chrono::hours(24);
    const base::Duration span = o.days * day;
    const int chunks = std::max(1, static_cast<int>(o.jobs / o.chunk));
    const base::Duration per_chunk = span / chunks;
    // Simulated time starts now, so that every event lands in a monthly partition (the legacy
    // one holds everything before this month) and the claims at the end run at its end.
    const base::Instant start = base::SystemClock().now();
    base::Instant now = start;
    ops::RetentionStore retention(*conn);
    ops::ArchiveOptions archive;
    archive.dir = o.archive_dir;
    archive.older_than = o.archive_after_days * day;
    nlohmann::json out{{"jobs", o.jobs},           {"chunk", o.chunk},
                       {"simulated_days", o.days}, {"retention", o.retention},
                       {"prune_batch", o.batch},   {"archive_after_days", o.archive_after_days}};
    double load_s = 0, prune_s = 0, vacuum_s = 0, archive_s = 0;
    std::int64_t pruned = 0, archived_partitions = 0, archived_events = 0;
    const auto began = BenchClock::now();
    for (int c = 0; c < chunks; ++c) {
        store.ensure_event_partitions(now, 3);
        auto t0 = BenchClock::now();
        push_chunk(*conn, static_cast<int>(o.jobs / chunks), now, per_chunk);
        load_s += seconds_since(t0);
        now += per_chunk;
        if (!o.retention) continue;
        t0 = BenchClock::now();
        std::int64_t got = 0;
        do {
            got = 0;
            for (const auto& p : store.prune_finished(now, o.batch)) got += p.jobs();
            pruned += got;
        } while (got == o.batch);
        prune_s += seconds_since(t0);
        // What autovacuum does over a simulated day and a half in production, done here at
        // once because the bench compresses it into seconds.
        t0 = BenchClock::now();
        pqxx::nontransaction(*conn).exec("VACUUM jobs, job_outcomes");
        vacuum_s += seconds_since(t0);
        t0 = BenchClock::now();
        for (const auto& a : retention.archive(archive, now)) {
            if (a.action == "archived") {
                ++archived_partitions;
                archived_events += a.rows;
            } else if (a.action == "failed") {
                throw std::runtime_error("archive of " + a.partition + " failed: " + a.detail);
            }
        }
        archive_s += seconds_since(t0);
    }
    out["push_s"] = seconds_since(began);
    out["load_s"] = load_s;
    out["prune_s"] = prune_s;
    out["vacuum_s"] = vacuum_s;
    out["archive_s"] = archive_s;
    out["pruned"] = pruned;
    out["prune_jobs_per_s"] = prune_s > 0 ? static_cast<double>(pruned) / prune_s : 0;
    out["archived_partitions"] = archived_partitions;
    out["archived_events"] = archived_events;

    {
        pqxx::work txn(*conn);
        txn.exec_params(
            "INSERT INTO jobs (org_id, enqueued_at, payload) "
            "SELECT $1, aclaim_ts($2::bigint + g), 'bench' FROM generate_series(1, $3) g",
            kOrg, now, o.pending);
        txn.commit();
    }
    pqxx::nontransaction(*conn).exec("ANALYZE jobs, job_outcomes, job_events");
    std::vector<double> ms;
    for (int i = 0; i < o.claims; ++i) {
        const auto t0 = BenchClock::now();
        const auto got = store.claim(kOrg, {"bench", 1, {}}, kLease, now);
        ms.push_back(seconds_since(t0) * 1000);
        if (got.leases.empty()) throw std::runtime_error("no pending job to claim");
    }
    const auto [mean, p99] = mean_p99(ms);
    out["claims"] = o.claims;
    out["claim_mean_ms"] = mean;
    out["claim_p99_ms"] = p99;

    pqxx::nontransaction(*conn).exec("VACUUM jobs, job_outcomes");
    nlohmann::json tables = nlohmann::json::object();
    for (const auto& t : retention.table_sizes()) {
        tables[t.name] = {{"table_bytes", t.table_bytes}, {"index_bytes", t.index_bytes}};
    }
    {
        pqxx::read_transaction txn(*conn);
        tables["jobs"]["rows"] = txn.exec1("SELECT count(*) FROM jobs")[0].as<std::int64_t>();
        tables["job_events"]["rows"] =
            txn.exec1("SELECT count(*) FROM job_events")[0].as<std::int64_t>();
        tables["job_outcomes"]["rows"] =
            txn.exec1("SELECT count(*) FROM job_outcomes")[0].as<std::int64_t>();
        out["ledger_rows"] = txn.exec1("SELECT count(*) FROM job_prunes")[0].as<std::int64_t>();
        out["ledger_ranges"] =
            txn.exec1("SELECT count(*) FROM job_prunes CROSS JOIN LATERAL unnest(jobs)")[0]
                .as<std::int64_t>();
        out["partitions_attached"] =
            txn.exec1("SELECT count(*) FROM job_event_partitions WHERE state = 'attached'")[0]
                .as<std::int64_t>();
    }
    out["tables"] = tables;
    return out;
}

}  // namespace aclaim::drills
