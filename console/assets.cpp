#include "console/assets.hpp"

namespace aclaim::console {

std::optional<Asset> find_asset(std::string_view name) {
    for (const auto& a : embedded_assets()) {
        if (a.name == name) return a;
    }
    return std::nullopt;
}

std::string content_type_of(std::string_view name) {
    const auto dot = name.rfind('.');
    const auto ext = dot == std::string_view::npos ? std::string_view() : name.substr(dot + 1);
    if (ext == "html") return "text/html; charset=utf-8";
    if (ext == "css") return "text/css; charset=utf-8";
    if (ext == "js") return "text/javascript; charset=utf-8";
    if (ext == "svg") return "image/svg+xml";
    if (ext == "json") return "application/json";
    if (ext == "png") return "image/png";
    return "application/octet-stream";
}

}  // namespace aclaim::console
