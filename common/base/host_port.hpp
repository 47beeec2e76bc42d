#pragma once

#include <charconv>
#include <optional>
#include <string>
#include <string_view>

namespace aclaim::base {

/// A TCP listening address as operators write it: "127.0.0.1:9464", "0.0.0.0:9464",
/// "[::1]:9464" or "localhost:0" (port 0 picks a free port).
struct HostPort {
    std::string host;
    int port = 0;
};

/// Splits at the last colon; brackets around an IPv6 host are removed. Nothing on either side of
/// the colon, or a port outside 0..65535, is not an address.
inline std::optional<HostPort> parse_host_port(std::string_view text) {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) {
        return std::nullopt;
    }
    std::string_view host = text.substr(0, colon);
    const std::string_view port_text = text.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);
    }
    int port = -1;
    const auto [end, ec] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || port < 0 ||
        port > 65535 || host.empty()) {
        return std::nullopt;
    }
    return HostPort{std::string(host), port};
}

}  // namespace aclaim::base
