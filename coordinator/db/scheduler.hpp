#pragma once

#include <memory>
#include <pqxx/pqxx>

#include "common/base/clock.hpp"
#include "common/base/periodic_task.hpp"
#include "common/ops/schedule_store.hpp"
#include "coordinator/db/connections.hpp"
#include "coordinator/metrics/metrics.hpp"
#include "coordinator/options.hpp"

namespace aclaim::coordinator {

/// Enqueues the ticks of schedules (schema/0019) as they come due, on a connection of its own.
/// Every coordinator runs one; each due schedule is ticked by whichever gets its row lock first
/// (common::ScheduleStore::run_due), the others skip it, so a tick is enqueued once however many
/// run. Off the claim and completion path: its only read per interval is one probe of the
/// schedules_due index, empty when no schedule exists. A pass that leaves ticks due (a catch-up
/// after an outage) is followed by the next at once. What is due is decided on the injected
/// clock (a test moves a ManualClock and calls pass()); the pace between passes is real time, as
/// the reaper's, so a simulated clock never stops the thread nor spins it.
class Scheduler {
  public:
    /// `connections` (and its watchdog) and `clock` must outlive it.
    Scheduler(SchedulerOptions options, const Connections& connections, const common::Clock& clock,
              Metrics& metrics);
    ~Scheduler();
    Scheduler(const Scheduler&) = delete;
    Scheduler& operator=(const Scheduler&) = delete;

    void start();
    /// Returns after the pass in progress, if any, ends.
    void stop();

    /// One pass on `conn` at the clock's now: what the thread runs every interval. Public for
    /// tests.
    common::SchedulePass pass(pqxx::connection& conn);

  private:
    const SchedulerOptions options_;
    const Connections& connections_;
    const common::Clock& clock_;
    Metrics& metrics_;
    std::shared_ptr<StatementWatchdog::Watch> watch_;
    std::unique_ptr<pqxx::connection> conn_;
    bool failing_ = false;
    common::PeriodicTask task_{common::real_time()};
};

}  // namespace aclaim::coordinator
