#include "coordinator/db/scheduler.hpp"

#include <spdlog/spdlog.h>

namespace aclaim::coordinator {

namespace {
constexpr const char* kApplicationName = "aclaim-coordinator-scheduler";
}  // namespace

Scheduler::Scheduler(SchedulerOptions options, const Connections& connections,
                     const common::Clock& clock, Metrics& metrics)
    : options_(options), connections_(connections), clock_(clock), metrics_(metrics) {}

Scheduler::~Scheduler() {
    stop();
}

void Scheduler::stop() {
    task_.stop();
}

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
    if (options_.interval_ms <= 0 || task_.running()) return;
    watch_ = connections_.watch(kApplicationName);
    task_.start(common::PeriodicTask::Wait{0}, [this]() -> common::PeriodicTask::Wait {
        const auto interval = std::chrono::milliseconds(options_.interval_ms);
        // One pass under the watchdog; a broken or cut connection is replaced at the next
        // interval. A tick not enqueued is still due then: nothing is lost by waiting.
        try {
            if (!conn_) conn_ = connections_.open(kApplicationName, Connections::Role::RowSecurity);
            watch_->arm(conn_->sock(), clock_.monotonic_now() + connections_.deadline());
            const auto out = pass(*conn_);
            watch_->disarm();
            if (failing_) spdlog::info("scheduler: enqueuing schedule ticks again");
            failing_ = false;
            if (out.more) return common::PeriodicTask::Wait{0};
        } catch (const std::exception& e) {
            const bool cut = watch_->disarm();
            if (!failing_) {
                spdlog::warn("scheduler: pass failed{}: {}", cut ? " (cut at its deadline)" : "",
                             e.what());
            }
            failing_ = true;
            conn_.reset();
        }
        return interval;
    });
}

}  // namespace aclaim::coordinator
