#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "common/base/clock.hpp"
#include "common/store/assignment_store.hpp"
#include "coordinator/db/mailbox.hpp"
#include "coordinator/db/statement_watchdog.hpp"
#include "coordinator/metrics/metrics.hpp"
#include "coordinator/options.hpp"

namespace aclaim::coordinator {

/// Takes back expired leases every reap_interval_ms on a connection of its own, and posts each
/// reclaim so that the router can tell the former assignee at once. Each reclaim is decided by
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
    /// The watchdog must outlive the reaper.
    Reaper(ReaperOptions options, const common::Clock& clock, Mailbox& mailbox, Metrics& metrics,
           StatementWatchdog& watchdog);
    ~Reaper();
    Reaper(const Reaper&) = delete;
    Reaper& operator=(const Reaper&) = delete;

    void start();
    /// Returns after the pass in progress, if any, ends.
    void stop();
    /// Makes the promoter read the earliest run_at again. Any thread.
    void nudge();

  private:
    void run();
    /// Runs one store call under the watchdog; true when the watchdog cut it at its deadline.
    using Guarded = std::function<bool(const std::function<void()>&)>;
    /// Each returns true when a statement was cut at its deadline.
    bool reclaim(common::AssignmentStore& store, Poster& poster, const Guarded& guarded);
    bool promote(common::AssignmentStore& store, const Guarded& guarded);

    const ReaperOptions options_;
    const common::Clock& clock_;
    Mailbox& mailbox_;
    Metrics& metrics_;
    StatementWatchdog& watchdog_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stop_ = false;
    bool nudged_ = true;
    std::thread thread_;
};

}  // namespace aclaim::coordinator
