#pragma once

#include <string>

namespace aclaim::common {

/// Sets up the process-wide spdlog logger on stderr with the given level name
/// (trace, debug, info, warn, error, critical, off). Throws on an unknown level.
void setup_logging(const std::string& process_name, const std::string& level);

}  // namespace aclaim::common
