#include "common/base/periodic_task.hpp"

namespace aclaim::base {

namespace {

/// A wait with no deadline still goes through the clock in bounded pieces, so that a clock
/// whose wait cannot be told of a wake-up in time could not hold it forever.
constexpr PeriodicTask::Wait kLongestPiece = std::chrono::hours(1);

}  // namespace

void PeriodicTask::start(Wait first, Step step, std::function<void()> last) {
    thread_ = std::thread([this, first, step = std::move(step), last = std::move(last)] {
        Wait next = first;
        while (true) {
            std::optional<MonotonicTime> deadline;
            if (next != kUntilWoken) deadline = clock_.monotonic_now() + next;
            if (!wait(deadline, true)) break;
            next = step();
        }
        if (last) last();
    });
}

bool PeriodicTask::wait(std::optional<MonotonicTime> deadline, bool wakeable) {
    std::unique_lock lock(mutex_);
    while (!stop_ && !(wakeable && woken_)) {
        const auto now = clock_.monotonic_now();
        if (deadline && now >= *deadline) break;
        clock_.wait_until(cv_, lock, deadline ? *deadline : now + kLongestPiece);
    }
    if (wakeable) woken_ = false;
    return !stop_;
}

void PeriodicTask::wake() {
    {
        std::lock_guard lock(mutex_);
        woken_ = true;
    }
    cv_.notify_all();
}

void PeriodicTask::stop() {
    {
        std::lock_guard lock(mutex_);
        stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

bool PeriodicTask::stopping() const {
    std::lock_guard lock(mutex_);
    return stop_;
}

bool PeriodicTask::pause(Wait d) {
    return wait(clock_.monotonic_now() + d, false);
}

}  // namespace aclaim::base
