#include "common/store/pg_array.hpp"

namespace aclaim::common {

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
        // Every element is quoted so that NULL, commas, braces and blanks stay literal text.
        out += '"';
        for (char c : values[i]) {
            if (c == '"' || c == '\\') out += '\\';
            out += c;
        }
        out += '"';
    }
    out += '}';
    return out;
}

}  // namespace aclaim::common
