#pragma once

// Instants and durations cross into SQL as bigint microseconds (the schema's *_us columns and
// parameters), so they bind as statement parameters and read back with `field.as<Instant>()`
// without a hand conversion at every call.

#include <pqxx/strconv>
#include <string>

#include "common/base/clock.hpp"

namespace pqxx {

template <>
struct string_traits<aclaim::common::Instant> {
    using Instant = aclaim::common::Instant;
    static constexpr const char* name() noexcept { return "aclaim::common::Instant"; }
    static constexpr bool has_null() noexcept { return false; }
    static bool is_null(Instant /*unused*/) { return false; }
    [[noreturn]] static Instant null() { internal::throw_null_conversion(name()); }
    static void from_string(const char text[], Instant& out) {
        aclaim::common::Micros us = 0;
        string_traits<aclaim::common::Micros>::from_string(text, us);
        out = aclaim::common::instant_from_micros(us);
    }
    static std::string to_string(Instant t) { return std::to_string(aclaim::common::to_micros(t)); }
};

template <>
struct string_traits<aclaim::common::Duration> {
    using Duration = aclaim::common::Duration;
    static constexpr const char* name() noexcept { return "aclaim::common::Duration"; }
    static constexpr bool has_null() noexcept { return false; }
    static bool is_null(Duration /*unused*/) { return false; }
    [[noreturn]] static Duration null() { internal::throw_null_conversion(name()); }
    static void from_string(const char text[], Duration& out) {
        aclaim::common::Micros us = 0;
        string_traits<aclaim::common::Micros>::from_string(text, us);
        out = Duration(us);
    }
    static std::string to_string(Duration d) { return std::to_string(d.count()); }
};

}  // namespace pqxx
