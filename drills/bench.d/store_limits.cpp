// Raw SQL limits and claim cost at scale, with the store's own prepared statements and durable
// commits: what the coordinator is measured against.

#include <algorithm>
#include <atomic>
#include <barrier>
#include <pqxx/pqxx>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/store/assignment_store.hpp"
#include "common/store/claim_plan.hpp"
#include "common/store/pg_array.hpp"
#include "common/store/pg_time.hpp"
#include "common/store/store_sql.hpp"
#include "drills/bench.d/bench.hpp"

namespace aclaim::drills {

namespace {

constexpr base::Duration kLease = 60 * base::kSeconds;

base::Instant wall_now() {
    return base::SystemClock().now();
}

/// A single completion that notifies in its own transaction: kComplete with a pg_notify per
/// completed job in the same statement, for what the notification costs at commit.
constexpr const char* kCompleteNotifying = "bench_complete_notifying";

std::string complete_notifying_text() {
    std::string text = store::sql::kComplete.text;
    // The statement's last line selects from `done`: one more column there.
    const auto at = text.rfind("FROM done");
    if (at == std::string::npos) throw std::logic_error("kComplete no longer ends as expected");
    text.insert(at, ", pg_notify('aclaim_results', org_id || ':' || id || ':' || generation) ");
    return text;
}

/// One claim statement (LIMIT batch) and one completion statement of what it claimed, in one
/// transaction. Returns the jobs completed.
int claim_and_complete(store::AssignmentStore& store, std::int64_t org, const std::string& worker,
                       int batch, bool notify) {
    const auto now = wall_now();
    pqxx::work txn(store.connection(), "raw");
    // The claim as the store runs it: the queue locks, then the claim statement.
    const std::string queues = "{default}";
    txn.exec_prepared(store::sql::kClaimLocks.name, org, queues);
    const pqxx::result claimed = txn.exec_prepared(store.prepare_claim(store::ClaimPlan{}), org,
                                                   worker, batch, now, kLease, queues);
    if (claimed.empty()) return 0;
    if (batch == 1) {
        const auto job = claimed[0]["id"].as<std::int64_t>();
        const auto gen = claimed[0]["generation"].as<std::int64_t>();
        txn.exec_prepared(notify ? kCompleteNotifying : store::sql::kComplete.name, org, job, gen,
                          worker, "r", now);
    } else {
        std::vector<std::int64_t> orgs, jobs, gens;
        std::vector<std::string> workers, refs;
        for (const auto& row : claimed) {
            orgs.push_back(org);
            jobs.push_back(row["id"].as<std::int64_t>());
            gens.push_back(row["generation"].as<std::int64_t>());
            workers.push_back(worker);
            refs.push_back("r");
        }
        txn.exec_prepared(store::sql::kCompleteBatch.name, store::pg_array(orgs),
                          store::pg_array(jobs), store::pg_array(gens), store::pg_array(workers),
                          store::pg_array(refs), now);
    }
    txn.commit();
    return static_cast<int>(claimed.size());
}

/// One raw loop's shape: threads, jobs claimed and completed per statement, and whether each
/// completion notifies (single only), for how long.
struct RawLoad {
    int threads = 1;
    int batch = 1;
    bool notify = false;
    double seconds = 8;
};

/// Jobs per second and CPU per job of one raw loop.
nlohmann::json measure(const RawOptions& o, RawLoad load) {
    const int threads = load.threads;
    const int batch = load.batch;
    std::atomic<long> done{0};
    std::barrier start(threads + 1);
    std::vector<std::thread> pool;
    pool.reserve(threads);
    std::atomic<bool> stop{false};
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            store::AssignmentStore store(o.dsn);
            if (load.notify)
                store.connection().prepare(kCompleteNotifying, complete_notifying_text());
            const std::string worker = "raw-" + std::to_string(t);
            start.arrive_and_wait();
            while (!stop.load()) {
                const int n = claim_and_complete(store, o.org, worker, batch, load.notify);
                if (n == 0) break;
                done.fetch_add(n);
            }
        });
    }
    start.arrive_and_wait();
    const auto began = BenchClock::now();
    const long before = done.load();
    const CpuSample cpu_began = sample_cpu(o.cpu);
    while (seconds_since(began) < load.seconds)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const long counted = done.load() - before;
    const double elapsed = seconds_since(began);
    const CpuSample cpu_ended = sample_cpu(o.cpu);
    stop.store(true);
    for (auto& th : pool) th.join();
    nlohmann::json out;
    out["jobs_per_s"] = static_cast<double>(counted) / elapsed;
    out["cpu"] = cpu_report(cpu_began, cpu_ended, static_cast<double>(counted));
    return out;
}

void load_pending(pqxx::connection& c, std::int64_t org, int count) {
    pqxx::work txn(c);
    txn.exec_params(
        "INSERT INTO jobs (org_id, enqueued_at, payload) "
        "SELECT $1, aclaim_ts($2::bigint + g), 'bench' FROM generate_series(1, $3) g",
        org, wall_now(), count);
    txn.commit();
}

/// Mean and p99 of `claims` one-job claims from `queues` (default only when empty), in
/// milliseconds.
std::pair<double, double> time_claims(const std::string& dsn, std::int64_t org, int claims,
                                      const std::vector<std::string>& queues = {}) {
    store::AssignmentStore store(dsn);
    std::vector<double> ms;
    for (int i = 0; i < claims; ++i) {
        const auto now = wall_now();
        const auto t0 = BenchClock::now();
        const auto out = store.claim(org, {"scale", 1, queues}, kLease, now);
        ms.push_back(seconds_since(t0) * 1000);
        if (out.leases.empty()) break;
    }
    std::sort(ms.begin(), ms.end());
    double sum = 0;
    for (double v : ms) sum += v;
    if (ms.empty()) return {0, 0};
    return {sum / static_cast<double>(ms.size()), ms[ms.size() * 99 / 100]};
}

}  // namespace

nlohmann::json run_raw(const RawOptions& o) {
    nlohmann::json out;
    const auto single = measure(o, {o.single_threads, 1, false, o.seconds});
    const auto batch = measure(o, {o.batch_threads, o.batch, false, o.seconds});
    out["raw_single_jobs_per_s"] = single["jobs_per_s"];
    out["raw_batch_jobs_per_s"] = batch["jobs_per_s"];
    out["raw_single_cpu"] = single["cpu"];
    out["raw_batch_cpu"] = batch["cpu"];
    if (o.notify_seconds > 0) {
        // The same loop without and with the notification, alternating twice, so that both see
        // the same machine however its other load drifts.
        const RawLoad quiet{o.single_threads, 1, false, o.notify_seconds / 2};
        const RawLoad notifying{o.single_threads, 1, true, o.notify_seconds / 2};
        nlohmann::json runs = nlohmann::json::array();
        double without = 0, with = 0;
        for (int round = 0; round < 2; ++round) {
            for (const RawLoad& load : {quiet, notifying}) {
                auto r = measure(o, load);
                (load.notify ? with : without) += r["jobs_per_s"].get<double>() / 2;
                r["notify"] = load.notify;
                runs.push_back(std::move(r));
            }
        }
        out["raw_single_unnotified_jobs_per_s"] = without;
        out["raw_single_notifying_jobs_per_s"] = with;
        out["notify_runs"] = runs;
    }
    return out;
}

nlohmann::json run_scale(const ScaleOptions& o) {
    constexpr std::int64_t kSmallOrg = 900;
    constexpr std::int64_t kLargeOrg = 901;
    auto conn = std::make_unique<pqxx::connection>(o.dsn);
    nlohmann::json out;
    load_pending(*conn, kSmallOrg, o.small_pending);
    pqxx::nontransaction(*conn).exec("VACUUM ANALYZE jobs");
    const auto small = time_claims(o.dsn, kSmallOrg, o.claims);

    const auto load_began = BenchClock::now();
    {
        pqxx::work txn(*conn);
        // Finished history of the same organization: it shares the table and the organization
        // but must not be in the claim's way.
        txn.exec_params(
            "INSERT INTO jobs (org_id, state, enqueued_at, payload, generation, assignee, "
            "claimed_at, attempts, completed_at, result_ref) "
            "SELECT $1, 'completed', aclaim_ts($2::bigint + g), 'done', 1, 'old', "
            "aclaim_ts($2::bigint + g), 1, "
            "aclaim_ts($2::bigint + g + 1), 'ref' FROM generate_series(1, $3) g",
            kLargeOrg, base::to_micros(wall_now() - 86'400 * base::kSeconds), o.large_completed);
        txn.commit();
    }
    load_pending(*conn, kLargeOrg, o.large_pending);
    pqxx::nontransaction(*conn).exec("VACUUM ANALYZE jobs");
    out["scale_load_s"] = seconds_since(load_began);
    const auto large = time_claims(o.dsn, kLargeOrg, o.claims);
    out["claim_10k_mean_ms"] = small.first;
    out["claim_10k_p99_ms"] = small.second;
    out["claim_1m_mean_ms"] = large.first;
    out["claim_1m_p99_ms"] = large.second;
    out["claims_timed"] = o.claims;

    // Queues and scheduled jobs: the same runnable count as the 10k measurement, spread over
    // kQueues queues, next to `future` jobs scheduled a day ahead in the same queues. Scheduled
    // rows are not in the claim's index, so they must cost the claim nothing.
    if (o.future > 0) {
        constexpr std::int64_t kQueueOrg = 902;
        constexpr int kQueues = 20;
        const auto began = BenchClock::now();
        {
            pqxx::work txn(*conn);
            txn.exec_params(
                "INSERT INTO jobs (org_id, queue, state, enqueued_at, run_at, payload) "
                "SELECT $1, 'q' || (g % $4), 'scheduled', aclaim_ts($2::bigint), "
                "aclaim_ts($2::bigint + 86400000000 + g), 'later' FROM generate_series(1, $3) g",
                kQueueOrg, wall_now(), o.future, kQueues);
            txn.exec_params(
                "INSERT INTO jobs (org_id, queue, enqueued_at, payload) "
                "SELECT $1, 'q' || (g % $4), aclaim_ts($2::bigint + g), 'now' "
                "FROM generate_series(1, $3) g",
                kQueueOrg, wall_now(), o.small_pending, kQueues);
            txn.commit();
        }
        pqxx::nontransaction(*conn).exec("VACUUM ANALYZE jobs");
        out["queues_load_s"] = seconds_since(began);
        std::vector<std::string> all;
        all.reserve(kQueues);
        for (int q = 0; q < kQueues; ++q) all.push_back("q" + std::to_string(q));
        const auto every = time_claims(o.dsn, kQueueOrg, o.claims, all);
        const auto one = time_claims(o.dsn, kQueueOrg, o.claims, {"q7"});
        out["queues"] = kQueues;
        out["future_scheduled"] = o.future;
        out["claim_queues_all_mean_ms"] = every.first;
        out["claim_queues_all_p99_ms"] = every.second;
        out["claim_queues_one_mean_ms"] = one.first;
        out["claim_queues_one_p99_ms"] = one.second;
    }
    return out;
}

}  // namespace aclaim::drills
