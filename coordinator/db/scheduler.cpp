#include "coordinator/db/scheduler.hpp"

#include <spdlog/spdlog.h>

namespace aclaim::coordinator {

Scheduler::Scheduler(SchedulerOptions options, const Connections& connections,
                     const common::Clock& clock, Metrics& metrics)
    : options_(options),
      clock_(clock),
      metrics_(metrics),
      task_("scheduler", "aclaim-coordinator-scheduler", "enqueuing schedule ticks again",
            connections, clock) {}

common::SchedulePass Scheduler::pass(pqxx::connection& conn) {
    auto out = common::ScheduleStore(conn).run_due(clock_.now());
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

void Scheduler::start() {
    // A tick not enqueued is still due at the next interval: nothing is lost by waiting.
    task_.start(std::chrono::milliseconds(options_.interval_ms),
                [this](pqxx::connection& conn) { return pass(conn).more; });
}

}  // namespace aclaim::coordinator
