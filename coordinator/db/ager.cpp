#include "coordinator/db/ager.hpp"

#include <spdlog/spdlog.h>

namespace aclaim::coordinator {

namespace {
constexpr const char* kApplicationName = "aclaim-coordinator-ager";
}  // namespace

Ager::Ager(AgingOptions options, const Connections& connections, const common::Clock& clock)
    : options_(options), connections_(connections), clock_(clock) {}

Ager::~Ager() {
    stop();
}

void Ager::stop() {
    task_.stop();
}

common::AgingPass Ager::pass(pqxx::connection& conn) {
    const auto out = common::AgingStore(conn).run(clock_.now(), options_.batch);
    if (out.raised > 0) spdlog::debug("ager: {} pending jobs raised in priority", out.raised);
    return out;
}

void Ager::start() {
    if (options_.interval_ms <= 0 || task_.running()) return;
    watch_ = connections_.watch(kApplicationName);
    task_.start(common::PeriodicTask::Wait{0}, [this]() -> common::PeriodicTask::Wait {
        const auto interval = std::chrono::milliseconds(options_.interval_ms);
        // A pass not run is run at the next interval, from the jobs' run_at: nothing is lost by
        // waiting but the time waited, which the aging bound counts (docs/guarantees.md).
        try {
            if (!conn_) conn_ = connections_.open(kApplicationName, Connections::Role::RowSecurity);
            watch_->arm(conn_->sock(), clock_.monotonic_now() + connections_.deadline());
            const auto out = pass(*conn_);
            watch_->disarm();
            if (failing_) spdlog::info("ager: aging pending jobs again");
            failing_ = false;
            if (out.more) return common::PeriodicTask::Wait{0};
        } catch (const std::exception& e) {
            const bool cut = watch_->disarm();
            if (!failing_) {
                spdlog::warn("ager: pass failed{}: {}", cut ? " (cut at its deadline)" : "",
                             e.what());
            }
            failing_ = true;
            conn_.reset();
        }
        return interval;
    });
}

}  // namespace aclaim::coordinator
