#include "console/login_throttle.hpp"

#include <algorithm>
#include <cstdint>

namespace aclaim::console {

namespace {

/// A name is the client's to choose, of any length: records keep a bounded prefix (two long
/// names that share it share a record, which only throttles them together).
constexpr std::size_t kMaxKeyBytes = 128;

std::string key_of(const std::string& s) {
    return s.substr(0, kMaxKeyBytes);
}

}  // namespace

LoginThrottle::LoginThrottle(const base::Clock& clock, LoginLimits limits)
    : clock_(clock), names_(limits.names), addresses_(limits.addresses) {}

std::optional<base::Duration> LoginThrottle::admit(const std::string& name,
                                                   const std::string& address) {
    const auto now = clock_.monotonic_now();
    const auto n = key_of(name);
    const auto a = key_of(address);
    std::lock_guard lock(mutex_);
    const auto by_name = names_.wait(n, now);
    const auto by_address = addresses_.wait(a, now);
    if (by_name || by_address) {
        return std::max(by_name.value_or(base::Duration{}), by_address.value_or(base::Duration{}));
    }
    names_.fail(n, now);
    addresses_.fail(a, now);
    return std::nullopt;
}

void LoginThrottle::succeeded(const std::string& name, const std::string& address) {
    std::lock_guard lock(mutex_);
    names_.forget(key_of(name));
    addresses_.take_back(key_of(address));
}

std::size_t LoginThrottle::records() const {
    std::lock_guard lock(mutex_);
    return names_.size() + addresses_.size();
}

std::optional<base::Duration> LoginThrottle::Table::wait(const std::string& key,
                                                         base::MonotonicTime now) {
    const auto it = by_key_.find(key);
    if (it == by_key_.end()) return std::nullopt;
    if (now - it->second.last >= limits_.forget_after) {
        by_key_.erase(it);
        return std::nullopt;
    }
    if (it->second.open_at > now)
        return std::chrono::ceil<base::Duration>(it->second.open_at - now);
    return std::nullopt;
}

void LoginThrottle::Table::fail(const std::string& key, base::MonotonicTime now) {
    auto it = by_key_.find(key);
    if (it == by_key_.end()) {
        make_room(now);
        it = by_key_.emplace(key, Record{}).first;
    }
    auto& r = it->second;
    ++r.failures;
    r.last = now;
    const int past = r.failures - limits_.free_failures;
    if (past < 0) return;
    // Doubling from first_wait, capped; the shift is bounded so that it cannot overflow.
    auto wait = limits_.first_wait * (std::int64_t{1} << std::min(past, 30));
    r.open_at = now + std::min<base::Duration>(wait, limits_.max_wait);
}

void LoginThrottle::Table::take_back(const std::string& key) {
    const auto it = by_key_.find(key);
    if (it != by_key_.end() && it->second.failures > 0) --it->second.failures;
}

void LoginThrottle::Table::make_room(base::MonotonicTime now) {
    if (by_key_.size() < limits_.max_records) return;
    std::erase_if(by_key_,
                  [&](const auto& kv) { return now - kv.second.last >= limits_.forget_after; });
    while (by_key_.size() >= limits_.max_records) {
        const auto stalest = std::min_element(
            by_key_.begin(), by_key_.end(),
            [](const auto& x, const auto& y) { return x.second.last < y.second.last; });
        by_key_.erase(stalest);
    }
}

}  // namespace aclaim::console
