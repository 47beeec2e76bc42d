#pragma once

// The aging pass's statements (schema/baseline/tables.sql).

#include "common/store/statement.hpp"

namespace aclaim::coordinator::sql {

using store::sql::Statement;

/// The transaction lock that makes one coordinator the ager while the others pass: taken with a
/// try, never waited for, and apart from every lock a claim takes (kClaimLocks).
inline const Statement kAgingTryLock{
    "aclaim_aging_try_lock",
    "SELECT pg_try_advisory_xact_lock(hashtextextended('aclaim aging', 0)) AS held",
    {}};

/// $1 now, $2 batch. Raises the priority of the pending jobs of aged queues whose wait crossed a
/// step since the last pass (aclaim_age_jobs): how many, and whether a queue is still behind.
inline const Statement kAgeJobs{"aclaim_age_jobs",
                                "SELECT raised, more FROM aclaim_age_jobs($1::bigint, $2::int)",
                                {"now_us bigint", "batch int"}};

}  // namespace aclaim::coordinator::sql
