#pragma once

#include <pqxx/pqxx>

#include "common/base/clock.hpp"
#include "common/ops/schedule_store.hpp"
#include "coordinator/db/connections.hpp"
#include "coordinator/db/watched_pass.hpp"
#include "coordinator/metrics/metrics.hpp"
#include "coordinator/options.hpp"

namespace aclaim::coordinator {

/// Enqueues the ticks of schedules (schema/baseline/tables.sql) as they come due, on a connection
/// of its own. Every coordinator runs one; each due schedule is ticked by whichever gets its row
/// lock first (ops::ScheduleStore::run_due), the others skip it, so a tick is enqueued once
/// however many run. Off the claim and completion path: its only read per interval is one probe of
/// the schedules_due index, empty when no schedule exists. A pass that leaves ticks due (a catch-up
/// after an outage) is followed by the next at once (WatchedPass). A tick not enqueued is still
/// due at the next interval: nothing is lost by waiting.
class Scheduler final : public WatchedService<Scheduler, SchedulerOptions> {
  public:
    /// `connections` (and its watchdog) and `clock` must outlive it.
    Scheduler(SchedulerOptions options, const Connections& connections, const base::Clock& clock,
              Metrics& metrics);
    ~Scheduler() { stop(); }

    /// One pass on `conn` at the clock's now: what the thread runs every interval. Public for
    /// tests.
    ops::SchedulePass pass(pqxx::connection& conn);

  private:
    Metrics& metrics_;
};

}  // namespace aclaim::coordinator
