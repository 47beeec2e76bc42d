#include "coordinator/db/scheduler.hpp"

#include <spdlog/spdlog.h>

namespace aclaim::coordinator {

Scheduler::Scheduler(SchedulerOptions options, const Connections& connections,
                     const base::Clock& clock, Metrics& metrics)
    : WatchedService(options, "scheduler", "aclaim-coordinator-scheduler",
                     "enqueuing schedule ticks again", connections, clock),
      metrics_(metrics) {}

ops::SchedulePass Scheduler::pass(pqxx::connection& conn) {
    auto out = ops::ScheduleStore(conn).run_due(clock_.now());
    metrics_.schedule_jobs.fetch_add(static_cast<std::uint64_t>(out.enqueued),
                                     std::memory_order_relaxed);
    if (out.failed > 0) {
        spdlog::warn("scheduler: {} due schedules not ticked (they stay due): {}", out.failed,
                     out.error);
    }
    if (out.enqueued > 0) {
        spdlog::debug("scheduler: {} jobs enqueued for {} schedules", out.enqueued, out.schedules);
    }
    return out;
}

}  // namespace aclaim::coordinator
