#pragma once

// The one parser of organization ids as operators write them, on a command line (cli_flags.hpp's
// add_org) or in a file of records (aclaimctl enqueue --csv/--jsonl), so that each refuses the
// same values in the same words.

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace aclaim::base {

/// An organization id: a whole number from 1 up. 0 is no organization (the coordinator refuses
/// it), so it is refused here too.
inline std::optional<std::int64_t> parse_org(std::string_view text) {
    std::int64_t org = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), org);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size() || org < 1) {
        return std::nullopt;
    }
    return org;
}

/// Why `text` is not an organization id, as every program says it.
inline std::string org_refusal(std::string_view text) {
    return "'" + std::string(text) + "' is not an organization id (a whole number from 1 up)";
}

}  // namespace aclaim::base
