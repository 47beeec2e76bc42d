#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>

#include "common/base/clock.hpp"
#include "common/base/periodic_task.hpp"
#include "common/store/assignment_store.hpp"
#include "coordinator/db/connections.hpp"
#include "coordinator/db/mailbox.hpp"
#include "coordinator/db/statement_watchdog.hpp"
#include "coordinator/metrics/metrics.hpp"
#include "coordinator/options.hpp"

namespace aclaim::coordinator {

/// Takes back expired leases every reap_interval_ms on a connection of its own, and posts each
/// reclaim so that the router can tell the former assignee at once; ends parked jobs whose
/// park's deadline passed in the same round. Each reclaim is decided by
/// the store on the current locked row, so several coordinators reaping one database agree.
///
/// It is also the promoter of scheduled jobs: it knows the earliest run_at (one probe of the
/// index jobs_scheduled, read again only when nudged: at start, when the listener hears that a
/// job was scheduled, and after each promotion) and sleeps until then, so a delayed job or a
/// retry becomes pending, and its queue's parked claims are woken, when its time comes, without
/// polling the table.
/// Its statements run under the watchdog, as the DB threads' do.
class Reaper {
  public:
    /// `connections` (and its watchdog) must outlive the reaper.
    Reaper(ReaperOptions options, const Connections& connections, const base::Clock& clock,
           Mailbox& mailbox, Metrics& metrics);
    /// Out of line, where Session is complete.
    ~Reaper();

    void start();
    /// Returns after the pass in progress, if any, ends.
    void stop() { task_.stop(); }
    /// Makes the promoter read the earliest run_at again. Any thread.
    void nudge();

  private:
    /// One round of the thread: reclaims when the interval is up, promotes what is due, reads the
    /// earliest run_at when asked to; returns how long to wait before the next.
    base::PeriodicTask::Wait step();
    /// Runs one store call under the watchdog; true when the watchdog cut it at its deadline.
    using Guarded = std::function<bool(const std::function<void()>&)>;
    /// Each returns true when a statement was cut at its deadline.
    bool reclaim(store::AssignmentStore& store, Poster& poster, const Guarded& guarded);
    bool promote(store::AssignmentStore& store, const Guarded& guarded);
    /// Ends the parks whose deadline passed (protocol 1.6): the retry policy applies.
    bool expire_parks(store::AssignmentStore& store, const Guarded& guarded);

    const ReaperOptions options_;
    const base::Clock& clock_;
    Mailbox& mailbox_;
    Metrics& metrics_;
    const Connections& connections_;
    /// The reaper's pace is the interval in real time, so that a simulated clock never stops
    /// it; the promoter's timer ends a wait early when the
    /// earliest run_at, on the injected clock, comes sooner.
    const base::Clock& pace_ = base::real_time();
    std::atomic<bool> nudged_{true};
    // The reaper thread's own.
    struct Session;
    std::unique_ptr<Session> session_;
    base::PeriodicTask task_{pace_};
};

}  // namespace aclaim::coordinator
