#pragma once

#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/base/clock.hpp"

namespace aclaim::coordinator {

/// How many refused callbacks one source may cause (CallbackLimiter).
struct CallbackLimits {
    /// Refusals a source may cause at once before it is made to wait.
    double burst = 20;
    /// Refusals per second a source regains, up to `burst`.
    double per_second = 5;
    /// Sources tracked at once; beyond, the new ones share one bucket, so that a caller with many
    /// addresses cannot grow the table (or escape the limit).
    std::size_t max_sources = 4096;
};

/// A token bucket per source address for POST /v1/callback. Only refusals are charged (a forged
/// or malformed token, a body that is not an outcome): an outside system that presents the
/// tokens it was given is never slowed down, while guessing costs the guesser time and the
/// database nothing once its bucket is empty — the callback is answered 429 with Retry-After
/// before anything is parsed or looked up. Time is the injected clock's monotonic time.
/// Thread-safe.
class CallbackLimiter {
  public:
    /// The key of the bucket that sources beyond max_sources share.
    static constexpr const char* kOverflowSource = "(other sources)";

    /// `clock` must outlive this object.
    CallbackLimiter(CallbackLimits limits, const base::Clock& clock);

    /// None when `source` may be served now; otherwise how long it must wait (at least 1 s, as
    /// Retry-After counts whole seconds).
    std::optional<std::chrono::seconds> wait_for(const std::string& source);

    /// Charges one refusal to `source`.
    void refused(const std::string& source);

    /// Sources with a bucket of their own now.
    std::size_t sources() const;

  private:
    struct Bucket {
        double tokens = 0;
        base::MonotonicTime at{};
    };

    /// The bucket of `source`, refilled up to now; made (full) when there is room. Needs mutex_.
    Bucket& bucket(const std::string& source, base::MonotonicTime now);
    /// Forgets buckets that have refilled: they say nothing a fresh one would not. Needs mutex_.
    void forget_full(base::MonotonicTime now);

    const CallbackLimits limits_;
    const base::Clock& clock_;
    mutable std::mutex mutex_;
    std::unordered_map<std::string, Bucket> buckets_;
};

/// The source a callback is limited and audited by: its address without the port, since each
/// connection of one caller has a port of its own ("10.0.0.7:51234" -> "10.0.0.7",
/// "::1:40000" -> "::1").
std::string callback_source(const std::string& peer);

}  // namespace aclaim::coordinator
