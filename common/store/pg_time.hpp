#pragma once

// Instants and durations cross into SQL as bigint microseconds (the schema's *_us columns and
// parameters), so they bind as statement parameters and read back with `field.as<Instant>()`
// without a hand conversion at every call.

#include <pqxx/strconv>
#include <string>

#include "common/base/clock.hpp"

namespace pqxx {

/// What a type that crosses as bigint microseconds shares: never NULL, read and written through
/// its specialization's of_micros and micros_of.
template <typename T>
struct MicrosStringTraits {
    static constexpr bool has_null() noexcept { return false; }
    static bool is_null(T /*unused*/) { return false; }
    [[noreturn]] static T null() { internal::throw_null_conversion(string_traits<T>::name()); }
    static void from_string(const char text[], T& out) {
        aclaim::common::Micros us = 0;
        string_traits<aclaim::common::Micros>::from_string(text, us);
        out = string_traits<T>::of_micros(us);
    }
    static std::string to_string(T value) {
        return std::to_string(string_traits<T>::micros_of(value));
    }
};

template <>
struct string_traits<aclaim::common::Instant> : MicrosStringTraits<aclaim::common::Instant> {
    static constexpr const char* name() noexcept { return "aclaim::common::Instant"; }
    static aclaim::common::Instant of_micros(aclaim::common::Micros us) {
        return aclaim::common::instant_from_micros(us);
    }
    static aclaim::common::Micros micros_of(aclaim::common::Instant t) {
        return aclaim::common::to_micros(t);
    }
};

template <>
struct string_traits<aclaim::common::Duration> : MicrosStringTraits<aclaim::common::Duration> {
    static constexpr const char* name() noexcept { return "aclaim::common::Duration"; }
    static aclaim::common::Duration of_micros(aclaim::common::Micros us) {
        return aclaim::common::Duration(us);
    }
    static aclaim::common::Micros micros_of(aclaim::common::Duration d) { return d.count(); }
};

}  // namespace pqxx
