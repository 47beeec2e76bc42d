#pragma once

#include <string>
#include <string_view>

namespace aclaim::common {

/// Sets up the process-wide spdlog logger on stderr with the given level name
/// (trace, debug, info, warn, error, critical, off). Throws on an unknown level.
void setup_logging(const std::string& process_name, std::string_view level);

}  // namespace aclaim::common
