#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace aclaim::store {

// libpqxx 6.4 passes arrays as text literals; these build them safely.
std::string pg_array(const std::vector<std::int64_t>& values);
std::string pg_array(const std::vector<int>& values);
std::string pg_array(const std::vector<std::string>& values);
/// Arrays whose absent elements are SQL NULL.
std::string pg_array(const std::vector<std::optional<std::int64_t>>& values);
std::string pg_array(const std::vector<std::optional<int>>& values);
std::string pg_array(const std::vector<std::optional<std::string>>& values);

}  // namespace aclaim::store
