#pragma once

#include <string>
#include <string_view>

namespace aclaim::proto {

/// What every program's `--version` prints, on one line: its name, the project's version and the
/// protocol versions it speaks, e.g. "aclaim-coordinator 0.1.0 (protocol 1.0-1.6)". Here rather
/// than in base/ because base/ must not know the protocol.
std::string version_line(std::string_view program);

}  // namespace aclaim::proto
