#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "common/base/clock.hpp"
#include "coordinator/db/mailbox.hpp"
#include "coordinator/db/statement_watchdog.hpp"
#include "coordinator/http/metrics.hpp"
#include "coordinator/options.hpp"

namespace aclaim::coordinator {

/// Takes back expired leases every reap_interval_ms on a connection of its own, and posts each
/// reclaim so that the router can tell the former assignee at once. Each reclaim is decided by
/// the store on the current locked row, so several coordinators reaping one database agree.
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

  private:
    void run();

    const ReaperOptions options_;
    const common::Clock& clock_;
    Mailbox& mailbox_;
    Metrics& metrics_;
    StatementWatchdog& watchdog_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stop_ = false;
    std::thread thread_;
};

}  // namespace aclaim::coordinator
