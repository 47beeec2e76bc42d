#pragma once
// SIGINT and SIGTERM taken in a thread of their own, so that nothing runs in a signal handler.
// A handler may only do what is async-signal-safe, and under ThreadSanitizer a handler runs late,
// when its thread next enters the runtime: a server blocked in its accept loop could wait seconds
// for its own stop. Here the signals are blocked in every thread (block_stop_signals() runs before
// any thread starts, so all of them inherit the mask) and one waiter thread receives them.

#include <spdlog/spdlog.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <ctime>
#include <functional>
#include <thread>
#include <utility>

namespace aclaim::base {

/// Blocks SIGINT and SIGTERM in the calling thread and every thread it starts afterwards.
inline sigset_t block_stop_signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    return set;
}

/// Waits for the blocked stop signals: the first calls on_first (asks the program to wind down),
/// a second one ends the process at once with exit code 1.
class StopSignalWaiter {
  public:
    StopSignalWaiter(const sigset_t& set, std::function<void(int)> on_first)
        : set_(set), on_first_(std::move(on_first)), thread_([this] { wait(); }) {}
    ~StopSignalWaiter() {
        done_.store(true);
        thread_.join();
    }
    StopSignalWaiter(const StopSignalWaiter&) = delete;
    StopSignalWaiter& operator=(const StopSignalWaiter&) = delete;

  private:
    void wait() {
        int received = 0;
        while (!done_.load()) {
            // A bounded wait, so that the destructor's join never waits on a signal.
            const timespec step{0, 200'000'000};
            const int sig = sigtimedwait(&set_, nullptr, &step);
            if (sig <= 0) continue;
            if (++received > 1) {
                spdlog::warn("second {}: exiting at once", strsignal(sig));
                std::_Exit(1);
            }
            on_first_(sig);
        }
    }

    sigset_t set_;
    std::function<void(int)> on_first_;
    std::atomic<bool> done_{false};
    std::thread thread_;
};

}  // namespace aclaim::base
