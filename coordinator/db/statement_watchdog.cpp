#include "coordinator/db/statement_watchdog.hpp"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

namespace aclaim::coordinator {

void StatementWatchdog::Watch::arm(int socket, base::MonotonicTime deadline) {
    std::lock_guard lock(mutex_);
    socket_ = socket;
    deadline_ = deadline;
    cut_ = false;
}

bool StatementWatchdog::Watch::disarm() {
    std::lock_guard lock(mutex_);
    socket_ = -1;
    const bool cut = cut_;
    cut_ = false;
    return cut;
}

bool StatementWatchdog::Watch::cut_if_due(base::MonotonicTime now) {
    std::lock_guard lock(mutex_);
    if (socket_ < 0 || cut_ || now < deadline_) return false;
    // The owner cannot close the connection while this lock is held: it disarms first.
    ::shutdown(socket_, SHUT_RDWR);
    cut_ = true;
    return true;
}

StatementWatchdog::StatementWatchdog(const base::Clock& clock, std::chrono::milliseconds step)
    : clock_(clock), step_(step) {}

std::shared_ptr<StatementWatchdog::Watch> StatementWatchdog::watch(std::string name) {
    auto w = std::make_shared<Watch>();
    w->name_ = std::move(name);
    std::lock_guard lock(mutex_);
    watches_.push_back(w);
    return w;
}

void StatementWatchdog::start() {
    task_.start(step_, [this] {
        sweep();
        return step_;
    });
}

int StatementWatchdog::sweep() {
    std::vector<std::shared_ptr<Watch>> watches;
    {
        std::lock_guard lock(mutex_);
        watches = watches_;
    }
    const auto now = clock_.monotonic_now();
    int cut = 0;
    for (const auto& w : watches) {
        if (!w->cut_if_due(now)) continue;
        ++cut;
        spdlog::warn(
            "{}: the database did not answer a statement by its deadline; connection abandoned",
            w->name_);
    }
    std::lock_guard lock(mutex_);
    cuts_ += static_cast<std::uint64_t>(cut);
    return cut;
}

std::uint64_t StatementWatchdog::cuts() const {
    std::lock_guard lock(mutex_);
    return cuts_;
}

}  // namespace aclaim::coordinator
