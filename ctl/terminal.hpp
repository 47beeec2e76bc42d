#pragma once

// Small pieces the aclaimctl commands share: durations as operators type and read them, and
// knowing whether a person is watching.

#include <optional>
#include <string>
#include <string_view>

#include "common/base/clock.hpp"

namespace aclaim::ctl {

/// "500ms", "30s", "10m", "2h", "1d", or combinations such as "1h30m". Nothing else: a bare
/// number is refused, since seconds and minutes are both plausible readings of it.
std::optional<base::Duration> parse_duration(std::string_view text);

/// A duration for people: "850ms", "42s", "3m05s", "2h07m", "3d04h".
std::string format_duration(base::Duration d);

/// Whether the stream's file descriptor is a terminal.
bool is_terminal(int fd);

/// The text cut to `width` characters, ending in "..." when cut, with control characters shown
/// as spaces so that one record stays on one line.
std::string one_line(std::string_view text, std::size_t width);

/// "pending", "assigned", ...: the states a --state filter accepts.
bool is_job_state(std::string_view s);

}  // namespace aclaim::ctl
