#pragma once

// The canary's own database sessions, each a thread with its own connection:
//  - LockSampler: snapshots of sessions waiting on a lock (pg_stat_activity + pg_locks);
//  - ClaimProbe: one direct claim per second, as the coordinator's store runs it, timed without
//    the coordinator in between, next to the coordinator's own /metrics timing;
//  - Backlog: keeps the organization's pending queue topped up for the current poller count.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "common/base/periodic_task.hpp"
#include "common/store/assignment_store.hpp"

namespace aclaim::drills {

/// A thread that runs `tick` every period until stopped; what `tick` throws is kept as the last
/// error and the next tick tries again.
class Periodic {
  public:
    Periodic() = default;
    ~Periodic() { stop(); }
    Periodic(const Periodic&) = delete;
    Periodic& operator=(const Periodic&) = delete;

    void start(std::chrono::milliseconds period, std::function<void()> tick);
    void stop();
    std::string last_error() const;
    std::int64_t errors() const { return errors_.load(); }

  private:
    mutable std::mutex mutex_;
    std::string last_error_;
    std::atomic<std::int64_t> errors_{0};
    base::PeriodicTask task_{base::real_time()};
};

/// Lock waits seen in one interval.
struct LockSlice {
    std::int64_t samples = 0;      ///< snapshots taken
    std::int64_t waiting_max = 0;  ///< most sessions waiting on a lock in one snapshot
    std::int64_t claim_waits = 0;  ///< claim statements seen waiting, summed over snapshots
    std::int64_t other_waits = 0;  ///< other statements seen waiting, summed over snapshots
    double claim_wait_max_ms = 0;  ///< longest single lock wait of a claim seen (waitstart)
    std::map<std::string, std::int64_t> by_lock_type;  ///< waiting requests by pg_locks.locktype

    void add(const LockSlice& other);
};

class LockSampler {
  public:
    LockSampler(std::string dsn, std::chrono::milliseconds period)
        : dsn_(std::move(dsn)), period_(period) {}
    void start();
    void stop() { thread_.stop(); }
    LockSlice take();
    const Periodic& thread() const { return thread_; }

  private:
    std::string dsn_;
    std::chrono::milliseconds period_;
    std::unique_ptr<pqxx::connection> conn_;
    std::mutex mutex_;
    LockSlice current_;
    Periodic thread_;
};

/// Direct claims timed in one interval.
struct ProbeSlice {
    std::vector<double> claim_ms;                  ///< claim statement + commit, each
    std::map<std::string, std::int64_t> outcomes;  ///< claimed, no_work, ...

    void add(const ProbeSlice& other);
};

/// The probe's worker name in job_events.
inline constexpr const char* kProbeWorker = "canary-probe";

class ClaimProbe {
  public:
    /// Claims from `queues`, the ones the pollers serve.
    ClaimProbe(std::string dsn, store::OrgId org, std::vector<std::string> queues)
        : dsn_(std::move(dsn)), org_(org), queues_(std::move(queues)) {}
    void start();
    void stop() { thread_.stop(); }
    ProbeSlice take();
    const Periodic& thread() const { return thread_; }

  private:
    void probe_once();

    std::string dsn_;
    store::OrgId org_;
    std::vector<std::string> queues_;
    std::unique_ptr<store::AssignmentStore> store_;
    std::mutex mutex_;
    ProbeSlice current_;
    Periodic thread_;
};

/// Jobs added and the queue depth in one interval.
struct BacklogSlice {
    std::int64_t enqueued = 0;
    std::int64_t pending_min = -1;  ///< lowest pending count seen; -1 when none was read
};

class Backlog {
  public:
    /// Keeps at least `level * jobs_per_poller_s * 2 s + 50` jobs pending, dealt round robin
    /// over `queues` (every poller serves them all).
    Backlog(std::string dsn, store::OrgId org, double jobs_per_poller_s,
            const std::atomic<int>& level, std::vector<std::string> queues);
    /// Tops the queue up once, from the calling thread, before the pollers start.
    void fill();
    void start();
    void stop() { thread_.stop(); }
    BacklogSlice take();
    const Periodic& thread() const { return thread_; }

  private:
    void top_up(store::AssignmentStore& store);

    std::string dsn_;
    store::OrgId org_;
    std::vector<std::string> queues_;
    std::size_t next_queue_ = 0;
    double jobs_per_poller_s_;
    const std::atomic<int>& level_;
    std::unique_ptr<store::AssignmentStore> store_;
    std::mutex mutex_;
    BacklogSlice current_;
    Periodic thread_;
};

}  // namespace aclaim::drills
