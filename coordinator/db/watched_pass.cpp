#include "coordinator/db/watched_pass.hpp"

#include <spdlog/spdlog.h>

#include <utility>

namespace aclaim::coordinator {

WatchedPass::WatchedPass(std::string name, std::string application_name, std::string resumed,
                         const Connections& connections, const base::Clock& clock)
    : name_(std::move(name)),
      application_name_(std::move(application_name)),
      resumed_(std::move(resumed)),
      connections_(connections),
      clock_(clock) {}

void WatchedPass::start(std::chrono::milliseconds interval, Pass pass) {
    if (interval.count() <= 0 || task_.running()) return;
    watch_ = connections_.watch(application_name_);
    task_.start(base::PeriodicTask::Wait{0},
                [this, interval, pass = std::move(pass)] { return run_once(interval, pass); });
}

base::PeriodicTask::Wait WatchedPass::run_once(std::chrono::milliseconds interval,
                                               const Pass& pass) {
    try {
        if (!conn_) conn_ = connections_.open(application_name_, Connections::Role::RowSecurity);
        watch_->arm(conn_->sock(), clock_.monotonic_now() + connections_.deadline());
        const bool more = pass(*conn_);
        watch_->disarm();
        if (failing_) spdlog::info("{}: {}", name_, resumed_);
        failing_ = false;
        if (more) return base::PeriodicTask::Wait{0};
    } catch (const std::exception& e) {
        const bool cut = watch_->disarm();
        if (!failing_) {
            spdlog::warn("{}: pass failed{}: {}", name_, cut ? " (cut at its deadline)" : "",
                         e.what());
        }
        failing_ = true;
        conn_.reset();
    }
    return interval;
}

}  // namespace aclaim::coordinator
