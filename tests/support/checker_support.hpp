#pragma once

// Reading checker reports in tests: whether one invariant was caught, and that a whole history
// is clean, naming every violation when it is not.

#include <catch2/catch.hpp>
#include <pqxx/pqxx>
#include <string>

#include "common/ops/checker.hpp"

namespace aclaim::testing {

/// Whether checking `history` reports a violation of `invariant` (among any others).
inline bool caught(const ops::History& history, ops::Invariant invariant) {
    for (const auto& v : ops::check(history).violations) {
        if (v.invariant == invariant) return true;
    }
    return false;
}

/// The report's violations, one line each.
inline std::string violations(const ops::CheckReport& r) {
    std::string out;
    for (const auto& v : r.violations) {
        out += std::string(ops::to_string(v.invariant)) + " job " + std::to_string(v.job_id) +
               ": " + v.evidence + "\n";
    }
    return out;
}

/// The checker's report on the history in the database at `dsn`.
inline ops::CheckReport check_database(const std::string& dsn) {
    pqxx::connection conn(dsn);
    return ops::check(ops::load_history(conn));
}

/// Checks that the report found nothing, naming what it found when it did.
inline void check_clean(const ops::CheckReport& report) {
    INFO(violations(report));
    CHECK(report.ok());
}

}  // namespace aclaim::testing
