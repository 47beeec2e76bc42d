#pragma once

#include <spdlog/sinks/sink.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace aclaim::base {

/// Sets up the process-wide spdlog logger on stderr with the given level name
/// (trace, debug, info, warn, error, critical, off). Throws on an unknown level. Every message
/// passes escaping_sink: one event is one line, whatever a client put into it.
void setup_logging(const std::string& process_name, std::string_view level);

/// `text` with each control character (newline, carriage return, escape, ...) written as a
/// visible escape (\n, \r, \t, \x1b), so that text from outside cannot start a forged log line
/// or drive a terminal; cut to `max_bytes` with how much was left off. For names, paths and other
/// strings a client chose, quoted in a log line.
std::string printable(std::string_view text, std::size_t max_bytes = 256);

/// A sink that hands every message to `inner` with its control characters escaped (as
/// printable, without a length bound).
std::shared_ptr<spdlog::sinks::sink> escaping_sink(std::shared_ptr<spdlog::sinks::sink> inner);

}  // namespace aclaim::base
