#pragma once

#include <string_view>

namespace aclaim::base {

/// The queue of a job enqueued without one, and the only queue a worker that names none serves.
inline constexpr std::string_view kDefaultQueue = "default";
/// The longest queue name.
inline constexpr std::size_t kMaxQueueNameBytes = 64;

/// Queue names: 1..64 of [A-Za-z0-9_.:-], starting with a letter or digit (the schema's
/// queue_name constraint says the same).
constexpr bool valid_queue_name(std::string_view name) {
    if (name.empty() || name.size() > kMaxQueueNameBytes) return false;
    for (std::size_t i = 0; i < name.size(); ++i) {
        const char c = name[i];
        const bool alnum =
            (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        const bool punctuation = c == '_' || c == '.' || c == ':' || c == '-';
        if (!alnum && (i == 0 || !punctuation)) return false;
    }
    return true;
}

}  // namespace aclaim::base
