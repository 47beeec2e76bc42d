#include "coordinator/http/callback_limiter.hpp"

#include <algorithm>
#include <cmath>

namespace aclaim::coordinator {

CallbackLimiter::CallbackLimiter(CallbackLimits limits, const base::Clock& clock)
    : limits_(limits), clock_(clock) {}

CallbackLimiter::Bucket& CallbackLimiter::bucket(const std::string& source,
                                                 base::MonotonicTime now) {
    auto it = buckets_.find(source);
    if (it == buckets_.end()) {
        if (buckets_.size() >= limits_.max_sources) forget_full(now);
        const std::string& key =
            buckets_.size() >= limits_.max_sources ? std::string(kOverflowSource) : source;
        it = buckets_.try_emplace(key, Bucket{limits_.burst, now}).first;
    }
    Bucket& b = it->second;
    const double elapsed = std::chrono::duration<double>(now - b.at).count();
    if (elapsed > 0) {
        b.tokens = std::min(limits_.burst, b.tokens + elapsed * limits_.per_second);
        b.at = now;
    }
    return b;
}

void CallbackLimiter::forget_full(base::MonotonicTime now) {
    for (auto it = buckets_.begin(); it != buckets_.end();) {
        const double elapsed = std::chrono::duration<double>(now - it->second.at).count();
        const bool full =
            it->second.tokens + std::max(0.0, elapsed) * limits_.per_second >= limits_.burst;
        it = full && it->first != kOverflowSource ? buckets_.erase(it) : std::next(it);
    }
}

std::optional<std::chrono::seconds> CallbackLimiter::wait_for(const std::string& source) {
    const std::lock_guard lock(mutex_);
    const Bucket& b = bucket(source, clock_.monotonic_now());
    if (b.tokens >= 1) return std::nullopt;
    const double seconds = (1 - b.tokens) / limits_.per_second;
    return std::chrono::seconds(std::max<std::int64_t>(1, std::llround(std::ceil(seconds))));
}

void CallbackLimiter::refused(const std::string& source) {
    const std::lock_guard lock(mutex_);
    Bucket& b = bucket(source, clock_.monotonic_now());
    b.tokens = std::max(0.0, b.tokens - 1);
}

std::size_t CallbackLimiter::sources() const {
    const std::lock_guard lock(mutex_);
    return buckets_.size();
}

std::string callback_source(const std::string& peer) {
    const auto colon = peer.rfind(':');
    if (colon == std::string::npos || colon + 1 == peer.size()) return peer;
    const bool port = std::all_of(peer.begin() + static_cast<std::ptrdiff_t>(colon) + 1, peer.end(),
                                  [](char c) { return c >= '0' && c <= '9'; });
    return port ? peer.substr(0, colon) : peer;
}

}  // namespace aclaim::coordinator
