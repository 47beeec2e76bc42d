#include "common/store/pg_array.hpp"

namespace aclaim::store {

namespace {
template <typename T>
std::string numeric_array(const std::vector<T>& values) {
    std::string out = "{";
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (i) out += ',';
        out += std::to_string(values[i]);
    }
    out += '}';
    return out;
}

std::string quoted(const std::string& value) {
    // Every element is quoted so that NULL, commas, braces and blanks stay literal text.
    std::string out = "\"";
    for (char c : value) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    out += '"';
    return out;
}

template <typename T, typename Format>
std::string nullable_array(const std::vector<std::optional<T>>& values, Format format) {
    std::string out = "{";
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (i) out += ',';
        out += values[i] ? format(*values[i]) : std::string("NULL");
    }
    out += '}';
    return out;
}
}  // namespace

std::string pg_array(const std::vector<std::int64_t>& values) {
    return numeric_array(values);
}
std::string pg_array(const std::vector<int>& values) {
    return numeric_array(values);
}

std::string pg_array(const std::vector<std::string>& values) {
    std::string out = "{";
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (i) out += ',';
        out += quoted(values[i]);
    }
    out += '}';
    return out;
}

std::string pg_array(const std::vector<std::optional<std::int64_t>>& values) {
    return nullable_array(values, [](std::int64_t v) { return std::to_string(v); });
}
std::string pg_array(const std::vector<std::optional<int>>& values) {
    return nullable_array(values, [](int v) { return std::to_string(v); });
}
std::string pg_array(const std::vector<std::optional<std::string>>& values) {
    return nullable_array(values, quoted);
}

}  // namespace aclaim::store
