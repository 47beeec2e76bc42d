#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace aclaim::coordinator::metrics {

/// Latencies measure real work, so they are read from the system's monotonic clock and never
/// from the injected one: under a simulated clock every statement would look instant.
using LatencyClock = std::chrono::steady_clock;

/// A latency histogram with fixed bucket bounds. observe() is two relaxed atomic increments, so
/// the router and the DB threads never wait for each other or for a scrape; a scrape may see an
/// observation in its bucket before its sum, which Prometheus tolerates.
class Histogram {
  public:
    /// Upper bounds of the buckets in microseconds, from 100 µs (a statement on a warm
    /// connection) to 5 s (a lock wait or a commit behind a slow disk). Anything above goes to
    /// the +Inf bucket.
    static constexpr std::array<std::int64_t, 15> kBoundsUs{
        100,    250,     500,     1'000,   2'500,     5'000,     10'000,   25'000,
        50'000, 100'000, 250'000, 500'000, 1'000'000, 2'500'000, 5'000'000};
    static constexpr std::size_t kBuckets = kBoundsUs.size() + 1;

    struct Snapshot {
        std::array<std::uint64_t, kBuckets> buckets{};  ///< per bucket, not cumulative
        std::uint64_t count = 0;                        ///< the sum of buckets
        std::uint64_t sum_us = 0;
    };

    void observe(std::chrono::steady_clock::duration elapsed) {
        const auto us = std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count();
        const std::uint64_t v = us < 0 ? 0 : static_cast<std::uint64_t>(us);
        std::size_t i = 0;
        while (i < kBoundsUs.size() && static_cast<std::int64_t>(v) > kBoundsUs[i]) ++i;
        buckets_[i].fetch_add(1, std::memory_order_relaxed);
        sum_us_.fetch_add(v, std::memory_order_relaxed);
    }

    Snapshot snapshot() const {
        Snapshot s;
        for (std::size_t i = 0; i < kBuckets; ++i) {
            s.buckets[i] = buckets_[i].load(std::memory_order_relaxed);
            s.count += s.buckets[i];
        }
        s.sum_us = sum_us_.load(std::memory_order_relaxed);
        return s;
    }

  private:
    std::array<std::atomic<std::uint64_t>, kBuckets> buckets_{};
    std::atomic<std::uint64_t> sum_us_{0};
};

}  // namespace aclaim::coordinator::metrics
