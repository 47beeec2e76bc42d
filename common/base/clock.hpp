#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace aclaim::common {

/// Microseconds since the Unix epoch: the only unit of time that crosses into SQL.
using Micros = std::int64_t;

constexpr Micros kMillis = 1000;
constexpr Micros kSeconds = 1000 * kMillis;

/// Time behind an interface so that lease logic can be driven by tests without waiting.
class Clock {
  public:
    virtual ~Clock() = default;
    /// Wall-clock time: leases, events, anything written to the database.
    virtual Micros now() const = 0;
    /// Monotonic time: deadlines and intervals within this process.
    virtual std::chrono::steady_clock::time_point monotonic_now() const {
        return std::chrono::steady_clock::now();
    }
};

/// Production time.
class SystemClock final : public Clock {
  public:
    Micros now() const override {
        return std::chrono::duration_cast<std::chrono::microseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
            .count();
    }
};

/// Time that moves only when told to; safe to read from several threads. advance() moves wall
/// and monotonic time together; set() steps the wall clock only, as NTP may.
class ManualClock final : public Clock {
  public:
    explicit ManualClock(Micros start) : now_(start) {}
    Micros now() const override { return now_.load(); }
    std::chrono::steady_clock::time_point monotonic_now() const override {
        return std::chrono::steady_clock::time_point(std::chrono::microseconds(mono_.load()));
    }
    void set(Micros t) { now_.store(t); }
    void advance(Micros d) {
        now_.fetch_add(d);
        mono_.fetch_add(d);
    }

  private:
    std::atomic<Micros> now_;
    std::atomic<Micros> mono_{0};
};

/// A system clock shifted by a fixed offset: used to rehearse coordinators whose clocks disagree.
class SkewedClock final : public Clock {
  public:
    explicit SkewedClock(Micros skew) : skew_(skew) {}
    Micros now() const override { return base_.now() + skew_; }

  private:
    SystemClock base_;
    Micros skew_;
};

}  // namespace aclaim::common
