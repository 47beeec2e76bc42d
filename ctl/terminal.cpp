#include "ctl/terminal.hpp"

#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cstdio>

#include "common/store/assignment.hpp"

namespace aclaim::ctl {

std::optional<base::Duration> parse_duration(std::string_view text) {
    using std::chrono::hours;
    using std::chrono::milliseconds;
    using std::chrono::minutes;
    using std::chrono::seconds;
    if (text.empty()) return std::nullopt;
    base::Duration total{0};
    std::size_t i = 0;
    while (i < text.size()) {
        std::int64_t n = 0;
        const auto [end, ec] = std::from_chars(text.data() + i, text.data() + text.size(), n);
        if (ec != std::errc() || n < 0) return std::nullopt;
        i = static_cast<std::size_t>(end - text.data());
        std::size_t unit_end = i;
        while (unit_end < text.size() && std::isalpha(static_cast<unsigned char>(text[unit_end]))) {
            ++unit_end;
        }
        const std::string_view unit = text.substr(i, unit_end - i);
        base::Duration scale{0};
        if (unit == "ms")
            scale = milliseconds(1);
        else if (unit == "s")
            scale = seconds(1);
        else if (unit == "m")
            scale = minutes(1);
        else if (unit == "h")
            scale = hours(1);
        else if (unit == "d")
            scale = hours(24);
        else
            return std::nullopt;
        total += n * scale;
        i = unit_end;
    }
    return total;
}

std::string format_duration(base::Duration d) {
    const bool negative = d < base::Duration::zero();
    if (negative) d = -d;
    char buf[48];
    const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
    const long long s = std::chrono::duration_cast<std::chrono::seconds>(d).count();
    if (s < 1) {
        std::snprintf(buf, sizeof buf, "%lldms", ms);
    } else if (s < 60) {
        std::snprintf(buf, sizeof buf, "%llds", s);
    } else if (s < 3600) {
        std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
    } else if (s < 86400) {
        std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, s / 60 % 60);
    } else {
        std::snprintf(buf, sizeof buf, "%lldd%02lldh", s / 86400, s / 3600 % 24);
    }
    return negative ? std::string("-") + buf : std::string(buf);
}

bool is_terminal(int fd) {
    return ::isatty(fd) == 1;
}

std::string one_line(std::string_view text, std::size_t width) {
    std::string out;
    for (const char c : text) {
        out += std::iscntrl(static_cast<unsigned char>(c)) ? ' ' : c;
    }
    if (out.size() > width) {
        out.resize(width > 3 ? width - 3 : 0);
        out += "...";
    }
    return out;
}

bool is_job_state(std::string_view s) {
    return store::parse_job_state(s).has_value();
}

}  // namespace aclaim::ctl
