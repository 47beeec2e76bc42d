#pragma once

// Reading a result field that may be NULL, and a job state column, the same way in every store
// and client.

#include <optional>
#include <pqxx/pqxx>
#include <stdexcept>
#include <string>

#include "common/store/assignment.hpp"
#include "common/store/pg_time.hpp"

namespace aclaim::store {

/// The field's value, or nullopt when it is NULL.
template <typename T>
std::optional<T> optional_of(const pqxx::field& f) {
    if (f.is_null()) return std::nullopt;
    return f.as<T>();
}

/// A `state` column as a JobState; a name this build does not know is an error, never a guess.
inline JobState job_state_of(const pqxx::field& f) {
    const auto state = parse_job_state(f.c_str());
    if (!state) throw std::runtime_error(std::string("unknown job state '") + f.c_str() + "'");
    return *state;
}

}  // namespace aclaim::store
