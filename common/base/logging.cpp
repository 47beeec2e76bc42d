#include "common/base/logging.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <stdexcept>

namespace aclaim::common {

void setup_logging(const std::string& process_name, std::string_view level_name) {
    const std::string level(level_name);
    const auto lvl = spdlog::level::from_str(level);
    if (lvl == spdlog::level::off && level != "off") {
        throw std::invalid_argument("unknown log level '" + level + "'");
    }
    auto logger = spdlog::stderr_color_mt(process_name);
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%n] %v");
    logger->set_level(lvl);
    spdlog::set_default_logger(logger);
}

}  // namespace aclaim::common
