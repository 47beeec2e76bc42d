#pragma once

// The one source of time (after Envoy's TimeSource): wall-clock instants, which cross into SQL and
// decide leases, and monotonic time, which measures waits and deadlines inside one process, come
// from the same injected interface. Instants and durations are distinct types, so a call such as
// claim(..., lease, now) cannot have its arguments swapped silently.

#include <atomic>
#include <chrono>
#include <cstdint>

namespace aclaim::common {

/// A length of time, in the unit that crosses into SQL.
using Duration = std::chrono::microseconds;

/// A wall-clock instant, microseconds since the Unix epoch: what leases and events are stamped
/// with and what every statement takes as "now".
using Instant = std::chrono::time_point<std::chrono::system_clock, Duration>;

/// A monotonic instant: for waits, timeouts and intervals inside one process. Never stored and
/// never sent: it has no meaning outside the process that read it.
using MonoTime = std::chrono::steady_clock::time_point;

/// An instant as SQL takes it ($n::bigint microseconds since the epoch, see aclaim_ts()).
constexpr std::int64_t to_micros(Instant t) { return t.time_since_epoch().count(); }
constexpr std::int64_t to_micros(Duration d) { return d.count(); }
/// An instant read back from SQL (aclaim_us()).
constexpr Instant instant_from_micros(std::int64_t us) { return Instant(Duration(us)); }

/// Time behind an interface, so that lease rules and deadlines can be driven by tests without
/// waiting.
class TimeSource {
public:
    virtual ~TimeSource() = default;
    /// Wall-clock time: leases, events, anything written to the database.
    virtual Instant now() const = 0;
    /// Monotonic time: deadlines and intervals within this process.
    virtual MonoTime monotonic_now() const = 0;
};

/// Production time.
class SystemTimeSource final : public TimeSource {
public:
    Instant now() const override {
        return std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now());
    }
    MonoTime monotonic_now() const override { return std::chrono::steady_clock::now(); }
};

/// Time that moves only when told to, wall and monotonic together; safe to read from several
/// threads.
class ManualTimeSource final : public TimeSource {
public:
    explicit ManualTimeSource(Instant start) : wall_us_(to_micros(start)) {}
    Instant now() const override { return instant_from_micros(wall_us_.load()); }
    MonoTime monotonic_now() const override {
        return MonoTime(std::chrono::duration_cast<MonoTime::duration>(Duration(mono_us_.load())));
    }
    /// Moves both clocks forward.
    void advance(Duration d) {
        wall_us_.fetch_add(d.count());
        mono_us_.fetch_add(d.count());
    }
    /// Sets the wall clock only (a clock step, as NTP may make); monotonic time does not move.
    void set(Instant t) { wall_us_.store(to_micros(t)); }

private:
    std::atomic<std::int64_t> wall_us_;
    std::atomic<std::int64_t> mono_us_{0};
};

/// The system's time with the wall clock shifted by a fixed offset: rehearses coordinators whose
/// clocks disagree. Monotonic time is the system's.
class SkewedTimeSource final : public TimeSource {
public:
    explicit SkewedTimeSource(Duration skew) : skew_(skew) {}
    Instant now() const override { return base_.now() + skew_; }
    MonoTime monotonic_now() const override { return base_.monotonic_now(); }

private:
    SystemTimeSource base_;
    Duration skew_;
};

}  // namespace aclaim::common
