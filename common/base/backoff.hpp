#pragma once

#include <algorithm>
#include <chrono>

namespace aclaim::base {

/// Reconnection delay, for the coordinator's database connections and the worker's sessions:
/// starts at `first`, doubles per failed attempt up to `cap`, and starts over once a connection
/// is established. Jitter is the caller's business so this stays deterministic.
class Backoff {
  public:
    using Millis = std::chrono::milliseconds;

    explicit Backoff(Millis first = Millis(100), Millis cap = Millis(5000))
        : first_(first), cap_(std::max(first, cap)), next_(first) {}

    /// The delay to wait before this attempt; the next one waits twice as long.
    Millis next() {
        const Millis now = next_;
        next_ = std::min(cap_, next_ * 2);
        ++attempts_;
        return now;
    }

    void reset() {
        next_ = first_;
        attempts_ = 0;
    }

    /// Attempts since the last reset.
    int attempts() const { return attempts_; }

  private:
    Millis first_;
    Millis cap_;
    Millis next_;
    int attempts_ = 0;
};

}  // namespace aclaim::base
