#pragma once

// The columns the readers of jobs and job_results rows select, under the names job_record_of and
// result_record_of (job_record.hpp) read them by.

#include <string>

namespace aclaim::ops::sql {

/// The columns job_record_of reads, under the names it reads them by.
inline constexpr const char* kJobColumns = R"SQL(
id, org_id, state, generation, priority, aclaim_us(enqueued_at) AS enqueued_us, assignee,
aclaim_us(claimed_at) AS claimed_us, aclaim_us(lease_expires_at) AS lease_us, attempts,
max_attempts, aclaim_us(completed_at) AS completed_us, result_ref, last_error, quarantined_from,
quarantine_reason, queue, aclaim_us(run_at) AS run_at_us, aclaim_us(deadline_at) AS deadline_us,
dedupe_key, base_priority
)SQL";
/// kJobColumns and the payload.
inline const std::string kJobColumnsWithPayload = std::string(kJobColumns) + ", payload";
/// The columns result_record_of reads.
inline constexpr const char* kResultColumns =
    "job_id, org_id, generation, result_ref, aclaim_us(published_at) AS published_us";

}  // namespace aclaim::ops::sql
