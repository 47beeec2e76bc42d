#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace aclaim::base {

/// A length of time, wall or monotonic.
using Duration = std::chrono::microseconds;
/// A wall-clock instant, microseconds since the Unix epoch: leases, events, anything written to
/// the database. A distinct type from Duration, so that `claim(..., lease, now)` cannot be swapped
/// silently: an instant plus a duration is an instant, two instants cannot be added.
using Instant = std::chrono::sys_time<Duration>;
/// Monotonic time: deadlines and intervals within this process, never stored.
using MonotonicTime = std::chrono::steady_clock::time_point;

constexpr Duration kMillis = std::chrono::milliseconds(1);
constexpr Duration kSeconds = std::chrono::seconds(1);

/// The representation that crosses into SQL and JSON: a bigint count of microseconds, either since
/// the epoch (an Instant) or of a Duration. Convert at that boundary only.
using Micros = std::int64_t;
constexpr Micros to_micros(Instant t) {
    return t.time_since_epoch().count();
}
constexpr Micros to_micros(Duration d) {
    return d.count();
}
constexpr Instant instant_from_micros(Micros us) {
    return Instant(Duration(us));
}

/// The one time source: wall-clock instants and monotonic time from the same injected interface,
/// so that lease logic, deadlines, intervals and the waits between them can be driven by tests
/// without waiting.
class Clock {
  public:
    virtual ~Clock() = default;
    /// Wall-clock time.
    virtual Instant now() const = 0;
    /// Monotonic time. No default: a clock that moves its wall time by hand must say what its
    /// monotonic time does too.
    virtual MonotonicTime monotonic_now() const = 0;
    /// Blocks on `cv`, whose mutex `lock` holds, until it is notified or monotonic_now() reaches
    /// `deadline`. May return early (spuriously, or to let a caller see time moved by hand), so
    /// callers re-check their condition and the time. The default waits in real time, which is
    /// right for every clock whose monotonic time is the system's.
    virtual void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                            MonotonicTime deadline) const {
        cv.wait_until(lock, deadline);
    }
};

/// Production time.
class SystemClock final : public Clock {
  public:
    Instant now() const override {
        return std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now());
    }
    MonotonicTime monotonic_now() const override { return std::chrono::steady_clock::now(); }
};

/// The system's time, for a thread whose pace stays real while the clock its decisions are taken
/// on is simulated (a test's ManualClock must not stop the reaper).
inline const Clock& real_time() {
    static const SystemClock clock;
    return clock;
}

/// Time that moves only when told to; safe to read from several threads. advance() moves wall
/// and monotonic time together; set() steps the wall clock only, as NTP may.
class ManualClock final : public Clock {
  public:
    explicit ManualClock(Instant start) : now_(to_micros(start)) {}
    Instant now() const override { return instant_from_micros(now_.load()); }
    MonotonicTime monotonic_now() const override {
        return MonotonicTime(
            std::chrono::duration_cast<MonotonicTime::duration>(Duration(mono_.load())));
    }
    /// Time moves only by advance(), from another thread that holds no lock of the waiter's, so
    /// a waiter looks again every kWaitStep of real time: a notification still ends the wait at
    /// once, and an advance() past the deadline within that step. Nothing is decided by that
    /// step; it only bounds how long a test waits for a thread to notice.
    void wait_until(std::condition_variable& cv, std::unique_lock<std::mutex>& lock,
                    MonotonicTime deadline) const override {
        if (monotonic_now() < deadline) {
            waits_.fetch_add(1);
            cv.wait_for(lock, kWaitStep);
        }
    }
    /// How many waits found their deadline still ahead. A thread that waits on this clock and
    /// nothing else is parked on it once this has grown by two: a test sees that the thread went
    /// past whatever it did before, without waiting for it to do nothing.
    std::uint64_t waits() const { return waits_.load(); }
    void set(Instant t) { now_.store(to_micros(t)); }
    void advance(Duration d) {
        now_.fetch_add(d.count());
        mono_.fetch_add(d.count());
    }

  private:
    static constexpr std::chrono::milliseconds kWaitStep{1};
    std::atomic<Micros> now_;
    std::atomic<Micros> mono_{0};
    mutable std::atomic<std::uint64_t> waits_{0};
};

/// A system clock shifted by a fixed offset: used to rehearse coordinators whose clocks disagree.
class SkewedClock final : public Clock {
  public:
    explicit SkewedClock(Duration skew) : skew_(skew) {}
    Instant now() const override { return base_.now() + skew_; }
    /// Only the wall clock is skewed: intervals and deadlines in this process stay true.
    MonotonicTime monotonic_now() const override { return base_.monotonic_now(); }

  private:
    SystemClock base_;
    Duration skew_;
};

}  // namespace aclaim::base
