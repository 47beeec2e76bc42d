#pragma once

#include <algorithm>
#include <chrono>

namespace aclaim::coordinator {

/// Exponential reconnection delay: 100 ms doubling up to 5 s, back to the start on success.
class Backoff {
public:
    using Millis = std::chrono::milliseconds;

    explicit Backoff(Millis first = Millis(100), Millis cap = Millis(5000))
        : first_(first), cap_(cap), next_(first) {}

    /// The delay to wait now; the one after it is twice as long.
    Millis next() {
        const Millis now = next_;
        next_ = std::min(cap_, next_ * 2);
        return now;
    }

    void reset() { next_ = first_; }

private:
    Millis first_;
    Millis cap_;
    Millis next_;
};

}  // namespace aclaim::coordinator
