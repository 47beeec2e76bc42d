#pragma once

// aclaim-bench: the measurements behind drills/bench. Each subcommand runs one bounded
// measurement and prints one JSON object on stdout; the script puts them together.

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "worker/client.hpp"

namespace aclaim::drills {

using BenchClock = std::chrono::steady_clock;

/// The processes whose CPU time a measurement reports next to its own (0: not reported).
struct CpuPids {
    /// The coordinator's process id.
    int coordinator = 0;
    /// The PostgreSQL postmaster's process id: it and every child of it.
    int postgres = 0;
};

/// CPU time so far of the driver, the coordinator and PostgreSQL, and of the whole machine.
struct CpuSample {
    BenchClock::time_point at{};
    double self_us = 0;
    double coordinator_us = 0;
    double postgres_us = 0;
    double machine_busy = 0;   ///< jiffies, all cores
    double machine_total = 0;  ///< jiffies, all cores
};
CpuSample sample_cpu(const CpuPids& pids);
/// CPU microseconds per unit of work (a job, or a claim) between two samples, and each party's
/// share of the machine's capacity over that window (other_share: processes outside the
/// measurement).
nlohmann::json cpu_report(const CpuSample& a, const CpuSample& b, double units);
/// A "Name: N kB" field of /proc/PID/status (VmRSS, VmHWM, RssAnon, ...); throws when absent.
long proc_status_kb(int pid, const std::string& field);

/// How the driver's clients reach the coordinator: CURVE (the coordinator's public key, and the
/// database where each client's fresh key is registered for the organization under the client's
/// name) unless `plaintext`.
struct ClientAuth {
    bool plaintext = false;
    /// The coordinator's CURVE public key (Z85).
    std::string server_key;
    /// PostgreSQL connection string, for worker_keys.
    std::string dsn;

    /// Throws std::invalid_argument unless exactly one of plaintext or (server key and DSN).
    void validate() const;
    /// For each client name a key pair registered for `org`; empty keys for plaintext.
    std::vector<worker::CurveKeys> keys_for(std::int64_t org,
                                            const std::vector<std::string>& names) const;
};

/// Raw SQL limits with the store's own prepared claim and completion statements.
struct RawOptions {
    /// PostgreSQL connection string.
    std::string dsn;
    /// Organization whose pending jobs are consumed.
    std::int64_t org = 1;
    /// Length of each of the two measurements.
    double seconds = 8;
    /// Clients of the one-claim-one-completion-per-transaction measurement.
    int single_threads = 8;
    /// Clients of the batched measurement.
    int batch_threads = 4;
    /// Claims and completions per statement in the batched measurement.
    int batch = 100;
    /// Also the single loop with a pg_notify in each transaction (which the result notifier spares
    /// every completion), for what a notification costs at commit (seconds of that run; 0: skip).
    double notify_seconds = 0;
    CpuPids cpu;
};
nlohmann::json run_raw(const RawOptions& o);

/// The contract's floor (floor.cpp): the least SQL that keeps the contract, on bare tables in the
/// schema bench_floor, each client completing its last batch and claiming the next in one
/// transaction.
struct FloorOptions {
    /// PostgreSQL connection string.
    std::string dsn;
    /// Clients, each with its own connection.
    int threads = 4;
    /// Jobs claimed (and then completed) per statement.
    int batch = 100;
    double seconds = 8;
    /// Create bench_floor afresh with this many pending jobs first (0: use what is there).
    long setup_jobs = 0;
    /// 0: every client completes its last batch and claims the next one as fast as it can (the
    /// throughput floor). Otherwise claims of one job arrive on a fixed schedule at this rate, and
    /// each client takes what has arrived (up to `batch`), completes what it claimed before and
    /// claims for them in one transaction: the latency floor, each claim timed from its arrival to
    /// its commit (run_floor_latency).
    double rate = 0;
    CpuPids cpu;
};
nlohmann::json run_floor(const FloorOptions& o);

/// The coordinator a measurement talks to, and how its clients authenticate.
struct CoordinatorTarget {
    std::string endpoint;
    /// Organization the clients name in HELLO (and register their keys for).
    std::int64_t org = 1;
    ClientAuth auth;
};

/// End to end through a coordinator with worker client threads.
struct E2eOptions {
    CoordinatorTarget target;
    double seconds = 10;
    /// Worker client threads, one session each.
    int clients = 8;
    /// Jobs asked for per CLAIM.
    int max_jobs = 1;
    /// Jobs one client holds at most (claimed and not yet answered).
    int capacity = 8;
    /// How long each job is held before its COMPLETE, so that heartbeats happen.
    int hold_ms = 0;
    CpuPids cpu;
};
nlohmann::json run_e2e(const E2eOptions& o);

/// Open-loop paced claims, one job each, and their latency.
struct LatencyOptions {
    CoordinatorTarget target;
    double seconds = 8;
    /// Claims sent per second, on a fixed schedule regardless of replies.
    double rate = 500;
    /// DEALER sessions the claims are spread over.
    int sessions = 4;
    /// Claims are sent on the same schedule for this long first, and reported apart: in some
    /// runs the first claim statements of a fresh coordinator stalled for up to a second (cause
    /// not established), which is not the steady state the percentiles describe.
    double warmup_seconds = 0;
    CpuPids cpu;
    /// host:port of the coordinator's /metrics, for where the claims' time went (empty: skip).
    std::string metrics;
};
nlohmann::json run_latency(const LatencyOptions& o);

/// Many idle connected workers, and the coordinator's peak resident memory.
struct IdleOptions {
    CoordinatorTarget target;
    int workers = 1000;
    /// The coordinator's process id, for /proc/PID/status.
    int pid = 0;
    /// Upper bound on waiting for every WELCOME.
    double timeout_s = 60;
};
nlohmann::json run_idle(const IdleOptions& o);

/// Many idle workers, each long-polling a claim on an organization without jobs, beside a fleet
/// of active ones; the coordinator restarted under them.
struct CrowdOptions {
    /// The coordinator, and the organization of the idle workers (it must have no jobs).
    CoordinatorTarget target;
    int idle = 10000;
    /// Child processes holding the idle workers: a DEALER costs two descriptors.
    int processes = 8;
    /// The active workers (their own organization, with jobs), one job per claim.
    E2eOptions active;
    /// The coordinator's process id: its memory, and the process this run stops for the restart.
    int pid = 0;
    /// host:port of the coordinator's HTTP endpoint, for its session count.
    std::string metrics;
    /// Where the bench writes the process id of the coordinator it starts after the restart.
    std::string new_pid_file;
    /// How long the active workers' claims are timed with every idle worker connected.
    double steady_seconds = 5;
    /// Bound on connecting every idle worker, and on their reconnection after the restart.
    int connect_timeout_s = 180;
};
nlohmann::json run_crowd(const CrowdOptions& o);

/// One child process of run_crowd: `count` idle workers named idle-<first>.. until SIGTERM. Prints
/// "ready N SECONDS" once every one has had a session.
struct CrowdIdleOptions {
    CoordinatorTarget target;
    int count = 2500;
    int first = 0;
};
int run_crowd_idle(const CrowdIdleOptions& o);

/// One organization's one-job workers beside another organization's flood (neighbour.cpp).
struct NeighbourOptions {
    /// The quiet organization's workers (one job a claim) and the coordinator.
    E2eOptions active;
    /// The flooding organization: `flood_sessions` sessions, each with its own key, keeping
    /// `flood_claims` CLAIMs of `flood_max_jobs` outstanding and completing nothing; and
    /// `idle_sessions` sessions on one key, each long-polling a claim.
    std::int64_t flood_org = 2;
    int flood_sessions = 200;
    int flood_claims = 1;
    int flood_max_jobs = 100;
    int idle_sessions = 2000;
    /// Where the flood and the idle sessions connect; empty: the quiet organization's coordinator.
    /// Another coordinator on the same database and machine separates what the flood costs
    /// through the machine (cores, PostgreSQL) from what it costs through the shared coordinator.
    std::string flood_endpoint;
    /// Each window: the quiet one, then the one with the flood.
    double seconds = 8;
};
nlohmann::json run_neighbour(const NeighbourOptions& o);

/// Claim cost against a small and a large pending set, with many completed rows kept.
struct ScaleOptions {
    std::string dsn;
    int small_pending = 10000;
    int large_pending = 1000000;
    int large_completed = 1000000;
    /// Jobs scheduled a day ahead next to small_pending runnable ones over 20 queues (0: skip).
    int future = 1000000;
    /// Claims timed at each size.
    int claims = 300;
};
nlohmann::json run_scale(const ScaleOptions& o);

/// Finished jobs pushed through with retention on or off, then claim cost and table sizes.
struct RetentionBenchOptions {
    std::string dsn;
    /// Finished jobs written in all, in chunks of `chunk`, spread over `days` simulated days.
    std::int64_t jobs = 10'000'000;
    std::int64_t chunk = 250'000;
    int days = 90;
    /// Prune after every chunk (batches of `batch`), and archive partitions that ended
    /// `archive_after_days` before the simulated time into `archive_dir`.
    bool retention = true;
    int batch = 5000;
    int archive_after_days = 14;
    std::string archive_dir;
    /// Then: pending jobs beside what is left, and one-job claims timed against them.
    int pending = 10000;
    int claims = 300;
};
nlohmann::json run_retention(const RetentionBenchOptions& o);

/// Seconds since `start`.
inline double seconds_since(BenchClock::time_point start) {
    return std::chrono::duration<double>(BenchClock::now() - start).count();
}

}  // namespace aclaim::drills
