#pragma once

// The console's HTML, CSS, JavaScript and icon, compiled into the binary from assets/.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace aclaim::console {

struct Asset {
    std::string_view name;  ///< the file name under assets/
    std::string_view bytes;
};

const std::vector<Asset>& embedded_assets();

/// The asset of that name, if the binary has it.
std::optional<Asset> find_asset(std::string_view name);

/// The Content-Type for a file name, by its extension.
std::string content_type_of(std::string_view name);

}  // namespace aclaim::console
