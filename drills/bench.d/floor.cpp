// The contract's floor: the least SQL that keeps aclaim's contract, on bare tables shaped like
// the product's, on the same PostgreSQL and in the same run as the coordinator it is compared
// with (docs/performance.md, "The contract's floor").
//
// Per job the contract needs: a claim that picks pending rows in claim order past the rows other
// claims hold (SKIP LOCKED) and bumps each row's generation; a completion fenced on that
// generation; one audit row per transition in the transition's own transaction; one verdict row
// per completion, in an order consumers can read from. Nothing else: no queues, no retention
// index, no partitions, no triggers, no row security. Each client completes the batch it claimed
// last and claims the next one in one transaction, the shape a worker that completes and asks
// again in one message allows.

#include <algorithm>
#include <atomic>
#include <barrier>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <pqxx/pqxx>
#include <thread>
#include <vector>

#include "common/store/pg_array.hpp"
#include "drills/bench.d/bench.hpp"

namespace aclaim::drills {

namespace {

constexpr const char* kSchema = R"sql(
DROP SCHEMA IF EXISTS bench_floor CASCADE;
CREATE SCHEMA bench_floor;
CREATE TABLE bench_floor.jobs (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id           bigint      NOT NULL,
    state            text        NOT NULL DEFAULT 'pending',
    priority         integer     NOT NULL DEFAULT 0,
    enqueued_at      timestamptz NOT NULL,
    payload          text        NOT NULL DEFAULT '',
    generation       bigint      NOT NULL DEFAULT 0,
    assignee         text,
    lease_expires_at timestamptz,
    completed_at     timestamptz,
    result_ref       text
) WITH (fillfactor = 70);
CREATE INDEX jobs_claim_order ON bench_floor.jobs (org_id, priority DESC, enqueued_at, id)
    WHERE state = 'pending';
CREATE TABLE bench_floor.events (
    job_id     bigint      NOT NULL,
    org_id     bigint      NOT NULL,
    kind       text        NOT NULL,
    generation bigint      NOT NULL,
    at         timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE bench_floor.verdicts (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id     bigint      NOT NULL,
    org_id     bigint      NOT NULL,
    generation bigint      NOT NULL,
    result_ref text        NOT NULL,
    at         timestamptz NOT NULL DEFAULT now()
);
)sql";

constexpr const char* kLoad = R"sql(
INSERT INTO bench_floor.jobs (org_id, enqueued_at, payload)
SELECT 1, now() + g * interval '1 microsecond', 'bench' FROM generate_series(1, $1) g
)sql";

constexpr const char* kClaim = R"sql(
WITH picked AS (
    SELECT id FROM bench_floor.jobs
     WHERE org_id = $1 AND state = 'pending'
     ORDER BY priority DESC, enqueued_at, id
     LIMIT $2
       FOR UPDATE SKIP LOCKED),
claimed AS (
    UPDATE bench_floor.jobs j
       SET state = 'assigned', generation = j.generation + 1, assignee = $3,
           lease_expires_at = now() + interval '10 seconds'
      FROM picked
     WHERE j.id = picked.id
    RETURNING j.id, j.org_id, j.generation),
audit AS (
    INSERT INTO bench_floor.events (job_id, org_id, kind, generation)
    SELECT id, org_id, 'claimed', generation FROM claimed)
SELECT id, generation FROM claimed
)sql";

constexpr const char* kComplete = R"sql(
WITH done AS (
    UPDATE bench_floor.jobs j
       SET state = 'completed', completed_at = now(), result_ref = 'r', lease_expires_at = NULL
      FROM unnest($2::bigint[], $3::bigint[]) AS c(id, generation)
     WHERE j.id = c.id AND j.org_id = $1 AND j.state = 'assigned'
       AND j.generation = c.generation AND j.assignee = $4
    RETURNING j.id, j.org_id, j.generation),
audit AS (
    INSERT INTO bench_floor.events (job_id, org_id, kind, generation)
    SELECT id, org_id, 'completed', generation FROM done),
verdict AS (
    INSERT INTO bench_floor.verdicts (job_id, org_id, generation, result_ref)
    SELECT id, org_id, generation, 'r' FROM done)
SELECT count(*) FROM done
)sql";

/// What one client holds between transactions: the jobs it claimed last, with their generations.
struct Held {
    std::vector<std::int64_t> ids;
    std::vector<std::int64_t> generations;
};

/// One transaction: complete what `held` names, claim the next batch into it. Returns the jobs
/// completed; throws when a completion did not apply (the floor would be measuring nothing).
long complete_and_claim(pqxx::connection& c, const std::string& worker, int batch, Held& held) {
    pqxx::work txn(c, "floor");
    long completed = 0;
    if (!held.ids.empty()) {
        completed = txn.exec_prepared1("floor_complete", 1, store::pg_array(held.ids),
                                       store::pg_array(held.generations), worker)[0]
                        .as<long>();
        if (completed != static_cast<long>(held.ids.size())) {
            throw std::runtime_error("floor: a fenced completion did not apply");
        }
    }
    const pqxx::result claimed = txn.exec_prepared("floor_claim", 1, batch, worker);
    txn.commit();
    held.ids.clear();
    held.generations.clear();
    for (const auto& row : claimed) {
        held.ids.push_back(row[0].as<std::int64_t>());
        held.generations.push_back(row[1].as<std::int64_t>());
    }
    return completed;
}

/// A client's connection: the floor's two statements prepared.
void prepare_floor(pqxx::connection& c) {
    c.prepare("floor_claim", kClaim);
    c.prepare("floor_complete", kComplete);
}

/// Creates bench_floor afresh with `jobs` pending jobs.
void setup_floor(const std::string& dsn, long jobs) {
    pqxx::connection c(dsn);
    {
        pqxx::nontransaction q(c);
        q.exec(kSchema);
    }
    {
        pqxx::work txn(c);
        txn.exec_params(kLoad, jobs);
        txn.commit();
    }
    pqxx::nontransaction q(c);
    q.exec("VACUUM ANALYZE bench_floor.jobs");
    // As drills/bench's own load: the load's WAL written out now, not during the measurement.
    q.exec("CHECKPOINT");
}

/// Inserts, updates and deletes so far over the floor's tables (a backend reports its counts
/// when it ends, so read after every client has disconnected).
long row_writes(pqxx::connection& c) {
    pqxx::nontransaction q(c);
    return q
        .exec1(
            "SELECT coalesce(sum(n_tup_ins + n_tup_upd + n_tup_del), 0) FROM "
            "pg_stat_user_tables WHERE schemaname = 'bench_floor'")[0]
        .as<long>();
}

/// The server's WAL position, as a byte count and as text (for pg_waldump).
struct WalPosition {
    double bytes = 0;
    std::string text;
};
WalPosition wal_position(pqxx::connection& c) {
    pqxx::nontransaction q(c);
    const auto row =
        q.exec1("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn, pg_current_wal_lsn()::text");
    return {row[0].as<double>(), row[1].as<std::string>()};
}

}  // namespace

/// The latency floor: one-job claims arrive on a fixed schedule; each client, as a coordinator's
/// DB thread, takes what has arrived (up to the batch), completes what it claimed in its previous
/// transaction and claims one job per arrival in one transaction, and times every claim from its
/// arrival to its commit. No sockets, no coordinator: the least a claim waits for at this rate.
nlohmann::json run_floor_latency(const FloorOptions& o) {
    std::mutex mutex;
    std::condition_variable arrived;
    std::deque<BenchClock::time_point> waiting;
    std::vector<double> ms;  ///< arrival to commit, measured claims only
    long claimed_short = 0;  ///< arrivals a claim statement found no row for
    long statements = 0;
    std::atomic<bool> stop{false};
    std::atomic<bool> failed{false};
    std::string failure;
    std::barrier start(o.threads + 1);
    const auto warmup = std::chrono::seconds(1);
    std::vector<std::thread> pool;
    pool.reserve(static_cast<std::size_t>(o.threads));
    BenchClock::time_point measured_from{};
    for (int t = 0; t < o.threads; ++t) {
        pool.emplace_back([&, t] {
            try {
                pqxx::connection c(o.dsn);
                prepare_floor(c);
                const std::string worker = "floor-latency-" + std::to_string(t);
                Held held;
                start.arrive_and_wait();
                while (!stop.load()) {
                    std::vector<BenchClock::time_point> batch;
                    {
                        std::unique_lock lock(mutex);
                        arrived.wait_for(lock, std::chrono::milliseconds(50),
                                         [&] { return !waiting.empty() || stop.load(); });
                        const auto n = std::min(waiting.size(), static_cast<std::size_t>(o.batch));
                        batch.assign(waiting.begin(), waiting.begin() + static_cast<long>(n));
                        waiting.erase(waiting.begin(), waiting.begin() + static_cast<long>(n));
                    }
                    if (batch.empty()) continue;
                    complete_and_claim(c, worker, static_cast<int>(batch.size()), held);
                    const auto committed = BenchClock::now();
                    std::lock_guard lock(mutex);
                    ++statements;
                    claimed_short += static_cast<long>(batch.size() - held.ids.size());
                    for (const auto at : batch) {
                        if (at >= measured_from) {
                            ms.push_back(
                                std::chrono::duration<double, std::milli>(committed - at).count());
                        }
                    }
                }
            } catch (const std::exception& e) {
                if (!failed.exchange(true)) failure = e.what();
                start.arrive_and_drop();
            }
        });
    }
    start.arrive_and_wait();
    const auto began = BenchClock::now();
    measured_from = began + warmup;
    const auto end = measured_from + std::chrono::duration_cast<BenchClock::duration>(
                                         std::chrono::duration<double>(o.seconds));
    const auto interval = std::chrono::duration<double>(1.0 / o.rate);
    const CpuSample cpu_began = sample_cpu(o.cpu);
    long issued = 0;
    while (!failed.load()) {
        const auto now = BenchClock::now();
        if (now >= end) break;
        {
            std::lock_guard lock(mutex);
            while (began + std::chrono::duration_cast<BenchClock::duration>(interval * issued) <=
                   now) {
                waiting.push_back(now);
                ++issued;
            }
        }
        arrived.notify_all();
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    const CpuSample cpu_ended = sample_cpu(o.cpu);
    stop.store(true);
    arrived.notify_all();
    for (auto& th : pool) th.join();
    if (failed.load()) throw std::runtime_error(failure);
    if (ms.empty()) throw std::runtime_error("floor: no claim was timed");
    std::sort(ms.begin(), ms.end());
    auto pct = [&](double p) {
        return ms[std::min(ms.size() - 1,
                           static_cast<std::size_t>(p * static_cast<double>(ms.size())))];
    };
    nlohmann::json out;
    out["rate_per_s"] = o.rate;
    out["threads"] = o.threads;
    out["max_batch"] = o.batch;
    out["claims"] = ms.size();
    out["claims_without_a_row"] = claimed_short;
    out["mean_batch"] = static_cast<double>(issued) / static_cast<double>(std::max(1L, statements));
    out["claim_p50_ms"] = pct(0.50);
    out["claim_p99_ms"] = pct(0.99);
    out["claim_max_ms"] = ms.back();
    out["cpu"] = cpu_report(cpu_began, cpu_ended, static_cast<double>(ms.size()));
    return out;
}

nlohmann::json run_floor(const FloorOptions& o) {
    if (o.setup_jobs > 0) setup_floor(o.dsn, o.setup_jobs);
    if (o.rate > 0) return run_floor_latency(o);
    pqxx::connection admin(o.dsn);
    std::atomic<long> done{0};
    std::atomic<bool> stop{false};
    std::atomic<bool> failed{false};
    std::string failure;
    std::barrier start(o.threads + 1);
    std::vector<std::thread> pool;
    pool.reserve(static_cast<std::size_t>(o.threads));
    for (int t = 0; t < o.threads; ++t) {
        pool.emplace_back([&, t] {
            try {
                pqxx::connection c(o.dsn);
                prepare_floor(c);
                const std::string worker = "floor-" + std::to_string(t);
                Held held;
                // The first claim is not counted: it completes nothing.
                complete_and_claim(c, worker, o.batch, held);
                start.arrive_and_wait();
                while (!stop.load() && !held.ids.empty()) {
                    done.fetch_add(complete_and_claim(c, worker, o.batch, held));
                }
            } catch (const std::exception& e) {
                if (!failed.exchange(true)) failure = e.what();
                start.arrive_and_drop();
            }
        });
    }
    start.arrive_and_wait();
    const WalPosition wal_began = wal_position(admin);
    const long writes_before = row_writes(admin);
    const CpuSample cpu_began = sample_cpu(o.cpu);
    const auto began = BenchClock::now();
    const long before = done.load();
    while (seconds_since(began) < o.seconds && !failed.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const long counted = done.load() - before;
    const double elapsed = seconds_since(began);
    const CpuSample cpu_ended = sample_cpu(o.cpu);
    const WalPosition wal_ended = wal_position(admin);
    stop.store(true);
    for (auto& th : pool) th.join();
    if (failed.load()) throw std::runtime_error(failure);
    if (counted == 0) throw std::runtime_error("floor: nothing completed (too few jobs loaded?)");
    // Every client has disconnected, so every backend has reported its row counts; the ones
    // written after the window (the last transaction of each client) are a rounding error.
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    const long writes_after = row_writes(admin);
    const auto jobs = static_cast<double>(counted);
    nlohmann::json out;
    out["batch"] = o.batch;
    out["threads"] = o.threads;
    out["jobs"] = counted;
    out["jobs_per_s"] = jobs / elapsed;
    out["wal_bytes_per_job"] = (wal_ended.bytes - wal_began.bytes) / jobs;
    out["lsn_began"] = wal_began.text;
    out["lsn_ended"] = wal_ended.text;
    out["row_writes_per_job"] = static_cast<double>(writes_after - writes_before) / jobs;
    out["cpu"] = cpu_report(cpu_began, cpu_ended, jobs);
    return out;
}

}  // namespace aclaim::drills
