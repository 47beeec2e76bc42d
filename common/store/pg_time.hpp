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
        aclaim::base::Micros us = 0;
        string_traits<aclaim::base::Micros>::from_string(text, us);
        out = string_traits<T>::of_micros(us);
    }
    static std::string to_string(T value) {
        return std::to_string(string_traits<T>::micros_of(value));
    }
};

template <>
struct string_traits<aclaim::base::Instant> : MicrosStringTraits<aclaim::base::Instant> {
    static constexpr const char* name() noexcept { return "aclaim::base::Instant"; }
    static aclaim::base::Instant of_micros(aclaim::base::Micros us) {
        return aclaim::base::instant_from_micros(us);
    }
    static aclaim::base::Micros micros_of(aclaim::base::Instant t) {
        return aclaim::base::to_micros(t);
    }
};

template <>
struct string_traits<aclaim::base::Duration> : MicrosStringTraits<aclaim::base::Duration> {
    static constexpr const char* name() noexcept { return "aclaim::base::Duration"; }
    static aclaim::base::Duration of_micros(aclaim::base::Micros us) {
        return aclaim::base::Duration(us);
    }
    static aclaim::base::Micros micros_of(aclaim::base::Duration d) { return d.count(); }
};

}  // namespace pqxx
