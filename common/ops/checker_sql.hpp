#pragma once

// The checker's reads (checker.cpp): the whole history, in one repeatable-read snapshot, and the
// prune ledger that tells a pruned job from a lost one. Times come out as microseconds.

#include <string>

#include "common/ops/job_record_sql.hpp"

namespace aclaim::ops::sql {

/// Every job's authority columns, in id order.
inline constexpr const char* kCheckJobs =
    "SELECT id, org_id, state, generation, result_ref, quarantine_reason, queue, priority, "
    "base_priority FROM jobs "
    "ORDER BY id";

/// Every audit event, in the order written.
inline constexpr const char* kCheckEvents =
    "SELECT id, job_id, org_id, generation, kind, coalesce(worker, '') AS worker, "
    "aclaim_us(at) AS at_us, detail FROM job_events ORDER BY id";

/// Every published result (kResultColumns).
inline const std::string kCheckResults =
    std::string("SELECT ") + kResultColumns + " FROM job_results";

/// Every queue event (pause, resume, configure), in the order written.
inline constexpr const char* kCheckQueueEvents =
    "SELECT org_id, queue, kind, aclaim_us(at) AS at_us, detail FROM queue_events ORDER BY id";

/// Every pruned id range [first, last) of the prune ledger, with its organization.
inline constexpr const char* kPrunedRanges =
    "SELECT p.org_id, lower(r) AS first, upper(r) AS last "
    "FROM job_prunes p CROSS JOIN LATERAL unnest(p.jobs) AS r";

/// Every dependency edge (schema/baseline/tables.sql).
inline constexpr const char* kCheckDependencies =
    "SELECT job_id, depends_on, policy FROM job_dependencies";

/// Every exclusion (schema/baseline/tables.sql).
inline constexpr const char* kCheckExclusions =
    "SELECT job_id, coalesce(excluded_key, '') AS excluded_key, "
    "coalesce(completer_of, 0) AS completer_of FROM job_exclusions";

}  // namespace aclaim::ops::sql
