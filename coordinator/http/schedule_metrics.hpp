#pragma once

#include <ostream>
#include <pqxx/pqxx>

namespace aclaim::coordinator {

/// The schedules' gauges of /metrics, read in QueueMetrics' transaction and refresh: per
/// organization and schedule, its last and next tick (seconds since the epoch; a paused schedule
/// has no next tick, and one never ticked no last) and whether it is paused. A next tick well in
/// the past means no coordinator is enqueueing. Label cardinality is bounded like the queues':
/// the kMaxSeries schedules whose next tick is earliest are exported, the rest counted in
/// aclaim_schedule_series_dropped. Reads the schedules table, one row a schedule.
class ScheduleMetrics {
  public:
    static constexpr int kMaxSeries = 50;

    static void read(pqxx::transaction_base& txn, std::ostream& out);
};

}  // namespace aclaim::coordinator
