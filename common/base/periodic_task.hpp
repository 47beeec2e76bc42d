#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "common/base/clock.hpp"

namespace aclaim::base {

/// A thread that runs a step, waits, and runs it again until stopped: the one loop of every
/// background thread (reaper, retention, presence, result notifier, statement watchdog,
/// listener, the canary's samplers). Each step says how long to wait before the next; wake()
/// ends a wait early, stop() ends it for good. The waits go through the clock it is given, so a
/// test on a ManualClock drives them by advancing it. Declared as the last member of the class
/// whose thread it runs, it stops that thread before the other members the steps use are
/// destroyed, and makes the class neither copyable nor movable: the class declares neither a
/// destructor nor copy operations of its own for that.
class PeriodicTask {
  public:
    using Wait = MonotonicTime::duration;
    /// A step that returns this waits until woken or stopped, however long that takes.
    static constexpr Wait kUntilWoken = Wait::max();
    using Step = std::function<Wait()>;

    /// `clock` paces the waits; it must outlive the task.
    explicit PeriodicTask(const Clock& clock) : clock_(clock) {}
    ~PeriodicTask() { stop(); }
    PeriodicTask(const PeriodicTask&) = delete;
    PeriodicTask& operator=(const PeriodicTask&) = delete;

    /// Starts the thread: after `first` (0: at once) it runs `step`, then waits what the step
    /// returned, and so on. What `step` throws ends the thread: steps catch what they expect.
    /// Once stopped, the thread runs `last` (when given) before it ends.
    void start(Wait first, Step step, std::function<void()> last = {});
    /// Ends the wait in progress, or the next one when the step is running. Any thread.
    void wake();
    /// Asks the thread to stop and waits for the step in progress, if any, and `last`. Safe to
    /// call more than once, and when never started.
    void stop();

    bool running() const { return thread_.joinable(); }
    /// True once stop() was asked: for a step that loops within itself.
    bool stopping() const;
    /// Waits `d` through the clock within a step; false when stop() was asked meanwhile.
    bool pause(Wait d);

  private:
    /// Waits until `deadline` (none: forever), a wake or a stop; false when stopped.
    bool wait(std::optional<MonotonicTime> deadline, bool wakeable);

    const Clock& clock_;
    mutable std::mutex mutex_;
    std::condition_variable cv_;
    bool stop_ = false;
    bool woken_ = false;
    std::thread thread_;
};

}  // namespace aclaim::base
