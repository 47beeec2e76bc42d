// The one background-thread loop, driven by a ManualClock: a real thread, told apart from a
// sleeping one only by what the clock says.

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "common/base/clock.hpp"
#include "common/base/periodic_task.hpp"

using namespace aclaim;
using namespace std::chrono_literals;

namespace {

/// A ManualClock that lets the test know when the task's thread is waiting on it: an advance made
/// before the thread computed its next deadline would be counted into it.
class WatchedClock final : public base::Clock {
  public:
    base::Instant now() const override { return base.now(); }
    base::MonotonicTime monotonic_now() const override { return base.monotonic_now(); }
    void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                    base::MonotonicTime deadline) const override {
        waits.fetch_add(1);
        base.wait_until(cv, lock, deadline);
    }
    /// Returns once the thread has begun a wait after the call.
    bool wait_for_a_wait() const {
        const auto before = waits.load();
        for (int i = 0; i < 10'000 && waits.load() <= before + 1; ++i) {
            std::this_thread::sleep_for(1ms);
        }
        return waits.load() > before + 1;
    }

    base::ManualClock base{base::instant_from_micros(1'000'000)};
    mutable std::atomic<int> waits{0};
};

/// What the task's thread saw, and a handshake to wait for it. The real-time bound only turns a
/// step that never comes into a failure instead of a hang.
struct Steps {
    explicit Steps(const base::Clock& clock) : clock(clock) {}

    void record() {
        {
            std::lock_guard lock(mutex);
            at.push_back(clock.monotonic_now());
        }
        cv.notify_all();
    }
    bool wait_for_count(std::size_t n) {
        std::unique_lock lock(mutex);
        return cv.wait_for(lock, 10s, [&] { return at.size() >= n; });
    }
    std::vector<base::MonotonicTime> seen() {
        std::lock_guard lock(mutex);
        return at;
    }

    const base::Clock& clock;
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<base::MonotonicTime> at;
};

/// stop() run aside, so that a stop that does not end the wait fails the test.
bool stops_promptly(base::PeriodicTask& task) {
    auto stopped = std::async(std::launch::async, [&] { task.stop(); });
    return stopped.wait_for(10s) == std::future_status::ready;
}

}  // namespace

TEST_CASE("a periodic task runs its step when the clock reaches each interval, and on wake",
          "[periodic]") {
    WatchedClock clock;
    const auto t0 = clock.monotonic_now();
    Steps steps(clock);
    bool last_ran = false;
    base::PeriodicTask task(clock);
    task.start(
        10s,
        [&] {
            steps.record();
            return base::PeriodicTask::Wait{10s};
        },
        [&] { last_ran = true; });

    // The first run waits out the whole first interval on the clock: run at 9 s, it would have
    // read 9 s.
    REQUIRE(clock.wait_for_a_wait());
    clock.base.advance(base::Duration(9s));
    clock.base.advance(base::Duration(1s));
    REQUIRE(steps.wait_for_count(1));
    CHECK(steps.seen()[0] == t0 + 10s);

    // The next run waits a full interval from the first: again, a run before it would read less.
    REQUIRE(clock.wait_for_a_wait());
    clock.base.advance(base::Duration(9s));
    clock.base.advance(base::Duration(1s));
    REQUIRE(steps.wait_for_count(2));
    CHECK(steps.seen()[1] == t0 + 20s);

    // A wake ends the wait without the clock moving.
    task.wake();
    REQUIRE(steps.wait_for_count(3));
    CHECK(steps.seen()[2] == t0 + 20s);

    // A stop ends a wait the clock would never end, and runs the last step.
    REQUIRE(stops_promptly(task));
    CHECK(last_ran);
    CHECK(steps.seen().size() == 3);
    CHECK_FALSE(task.running());
}

TEST_CASE("a step waiting until woken runs only when woken; pause ends with a stop", "[periodic]") {
    base::ManualClock clock(base::instant_from_micros(1'000'000));
    Steps steps(clock);
    base::PeriodicTask task(clock);
    bool paused_to_the_end = true;
    task.start(base::PeriodicTask::kUntilWoken, [&] {
        steps.record();
        if (steps.seen().size() == 2) {
            // A pause inside a step is not ended by a wake, only by the clock or a stop.
            paused_to_the_end = task.pause(std::chrono::hours(1));
        }
        return base::PeriodicTask::kUntilWoken;
    });
    task.wake();
    REQUIRE(steps.wait_for_count(1));
    const auto first = steps.seen()[0];
    // A day passes: nothing runs until the next wake, which runs at once.
    clock.advance(base::Duration(std::chrono::hours(24)));
    task.wake();
    REQUIRE(steps.wait_for_count(2));
    CHECK(steps.seen()[1] == first + std::chrono::hours(24));
    task.wake();  // during the pause: it must not end it
    REQUIRE(stops_promptly(task));
    CHECK_FALSE(paused_to_the_end);
    CHECK(steps.seen().size() == 2);
}

TEST_CASE("a task never started stops at once", "[periodic]") {
    base::ManualClock clock(base::instant_from_micros(0));
    base::PeriodicTask task(clock);
    CHECK_FALSE(task.running());
    CHECK(stops_promptly(task));
}
