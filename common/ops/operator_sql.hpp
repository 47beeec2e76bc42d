#pragma once

// The statements of the operator's console (aclaimctl status, inspect, jobs list, release, fail).
// Like the store's, they take time as $n microseconds and never call now(). The two transitions
// are fenced on the generation the operator saw, so an operator can never act on a later holder.

#include "common/store/store_sql.hpp"

namespace aclaim::common::sql {

/// $1 now, $2 organization (0: all). One row per organization. Lease liveness is decided against
/// the caller's clock, the same way the reaper decides it.
inline const Statement kOperatorStatus{"aclaim_operator_status",
                                       R"SQL(
SELECT org_id,
       count(*) FILTER (WHERE state = 'pending') AS pending,
       count(*) FILTER (WHERE state = 'assigned') AS assigned,
       count(*) FILTER (WHERE state = 'completed') AS completed,
       count(*) FILTER (WHERE state = 'failed') AS failed,
       count(*) FILTER (WHERE state = 'quarantined') AS quarantined,
       count(*) FILTER (WHERE state = 'assigned' AND lease_expires_at > aclaim_ts($1::bigint))
           AS live_leases,
       count(*) FILTER (WHERE state = 'assigned' AND lease_expires_at <= aclaim_ts($1::bigint))
           AS expired_leases,
       count(*) FILTER (WHERE state = 'completed'
                          AND completed_at > aclaim_ts($1::bigint - 60000000))
           AS completed_last_minute,
       aclaim_us(min(enqueued_at) FILTER (WHERE state = 'pending')) AS oldest_pending_us
  FROM jobs
 WHERE $2::bigint = 0 OR org_id = $2::bigint
 GROUP BY org_id ORDER BY org_id
)SQL",
                                       {"now_us bigint", "org bigint"}};

/// The two readers below are templates whose {COLUMNS} becomes kJobColumnsWithPayload
/// (job_record.hpp). $1 job.
inline constexpr const char* kOperatorJob = "SELECT {COLUMNS} FROM jobs WHERE id = $1::bigint";

/// $1 org or NULL, $2 state or NULL, $3 assignee or NULL, $4 enqueued before (us) or NULL,
/// $5 after this id, $6 limit. Paging by id keeps every page one range of the primary key.
inline constexpr const char* kOperatorList = R"SQL(
SELECT {COLUMNS}
  FROM jobs
 WHERE ($1::bigint IS NULL OR org_id = $1::bigint)
   AND ($2::text IS NULL OR state = $2::text)
   AND ($3::text IS NULL OR assignee = $3::text)
   AND ($4::bigint IS NULL OR enqueued_at < aclaim_ts($4::bigint))
   AND id > $5::bigint
 ORDER BY id
 LIMIT $6::int
)SQL";

/// $1 job, $2 generation, $3 operator, $4 now, $5 detail. A stuck assignment back to pending.
/// Like a worker's own release it gives the attempt back: the job was not at fault (use fail
/// for a job that should not run again). The next claim gets a higher generation.
inline const Statement kOperatorRelease{
    "aclaim_operator_release",
    R"SQL(
WITH r AS (
    UPDATE jobs
       SET state = 'pending', assignee = NULL, claimed_at = NULL, lease_expires_at = NULL,
           attempts = attempts - 1
     WHERE id = $1::bigint AND state = 'assigned' AND generation = $2::bigint
    RETURNING id, org_id, generation
), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, detail)
    SELECT id, org_id, generation, 'released', $3::text, aclaim_ts($4::bigint), $5::text FROM r
)
SELECT id, aclaim_wake(org_id) FROM r
)SQL",
    {"job bigint", "generation bigint", "operator text", "now_us bigint", "detail text"}};

/// $1 job, $2 generation, $3 operator, $4 now, $5 detail, $6 last_error. A stuck assignment
/// failed for good; the failed CHECK wants completed_at set and no lease or result.
inline const Statement kOperatorFail{"aclaim_operator_fail",
                                     R"SQL(
WITH f AS (
    UPDATE jobs
       SET state = 'failed', completed_at = aclaim_ts($4::bigint), lease_expires_at = NULL,
           last_error = $6::text
     WHERE id = $1::bigint AND state = 'assigned' AND generation = $2::bigint
    RETURNING id, org_id, generation
), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, detail)
    SELECT id, org_id, generation, 'failed', $3::text, aclaim_ts($4::bigint), $5::text FROM f
)
SELECT id FROM f
)SQL",
                                     {"job bigint", "generation bigint", "operator text",
                                      "now_us bigint", "detail text", "last_error text"}};

/// Bounds the wait for a row a coordinator is updating, so that the console never hangs.
inline constexpr const char* kOperatorLockTimeout = "SET LOCAL lock_timeout = '5s'";

/// The statements above that take parameters, run unprepared on the caller's connection (their
/// names only identify them); listed for the test that holds each text to its contract.
inline const std::vector<const Statement*> kOperatorStatements = {
    &kOperatorStatus, &kOperatorRelease, &kOperatorFail};

}  // namespace aclaim::common::sql
