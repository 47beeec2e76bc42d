#pragma once

#include "common/base/clock.hpp"
#include "common/base/periodic_task.hpp"
#include "common/store/assignment_store.hpp"
#include "coordinator/db/connections.hpp"
#include "coordinator/metrics/metrics.hpp"
#include "coordinator/options.hpp"

namespace aclaim::coordinator {

/// What one retention pass did.
struct RetentionPass {
    bool held_lock = false;  ///< false: another coordinator holds the retention lock
    int batches = 0;
    store::Pruned pruned;          ///< over every organization (org_id 0)
    int park_refusals_pruned = 0;  ///< counts of refused park callbacks past their keep
    std::vector<std::string> partitions_created;
};

/// Retention on a connection of its own. Every retention_interval_ms it tries the retention lock
/// (a session advisory lock, never waited for): the coordinator that gets it keeps job_events'
/// monthly partitions partitions_ahead months ahead, then prunes finished jobs past their
/// queue's retention in batches of retention_batch, one transaction each, pausing
/// retention_pause_ms between batches, until a batch comes back short; the others pass. One
/// pruner at a time keeps the deletes' I/O to one paced stream however many coordinators run,
/// and a pruner that dies releases the lock with its session, so the next pass elsewhere takes
/// over. A prune batch takes no advisory lock and locks only finished rows (SKIP LOCKED), so it
/// never holds a lock a claim needs. Its statements run under the watchdog, as the reaper's do.
class Retention {
  public:
    /// `connections` (and its watchdog) must outlive it.
    Retention(RetentionOptions options, const Connections& connections, const base::Clock& clock,
              Metrics& metrics);

    void start();
    /// Returns after the batch in progress, if any, ends.
    void stop() { task_.stop(); }

    /// One pass on `store`, now: what the thread runs every interval. Public for tests.
    RetentionPass pass(store::AssignmentStore& store);

  private:
    void observe(const store::PartitionSummary& s);

    const RetentionOptions options_;
    const base::Clock& clock_;
    Metrics& metrics_;
    const Connections& connections_;
    std::shared_ptr<StatementWatchdog::Watch> watch_;
    /// Paces passes and the pauses between batches in real time, as the reaper's.
    base::PeriodicTask task_{base::real_time()};
};

}  // namespace aclaim::coordinator
