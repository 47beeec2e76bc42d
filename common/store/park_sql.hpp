#pragma once

// The statements of parked jobs (protocol 1.6, schema/baseline/tables.sql): the holder's PARK
// and the reaper's end of a park whose deadline passed. The outside system's callback is the
// schema's aclaim_finish_parked, which the SQL API and the coordinator's POST /v1/callback both
// call (kFinishParked), so that both are one fence.

#include "common/store/store_sql.hpp"

namespace aclaim::store::sql {

/// $1 org, $2 job, $3 generation, $4 worker, $5 now, $6 the park's deadline, $7 note, $8 the
/// token (64 hex digits; only its hash is stored). The holder of a live lease of the current
/// generation hands the job to an outside system: the job becomes parked until $6 (which
/// replaces the attempt's run deadline), keeps its holder and generation and has no lease; the
/// park's row holds the token's hash. A PARK re-sent after a lost reply finds the job parked by
/// the same generation and holder before its deadline and parks it again: the row's token is
/// replaced by the re-sent one (the same, when the coordinator re-sends it after a lost
/// connection), so the latest token the holder was given is the one that works.
inline const Statement kPark{"aclaim_park",
                             R"SQL(
WITH parked AS (
    UPDATE jobs j SET state = 'parked', lease_expires_at = NULL,
                      deadline_at = aclaim_ts($6::bigint)
     WHERE id = $2::bigint AND org_id = $1::bigint AND generation = $3::bigint
       AND assignee = $4::text
       AND ((state = 'assigned' AND lease_expires_at > aclaim_ts($5::bigint))
            OR (state = 'parked' AND deadline_at > aclaim_ts($5::bigint)))
    RETURNING j.id, j.org_id, j.queue, j.generation
), saved AS (
    INSERT INTO job_parks AS p (token_hash, job_id, org_id, generation, parked_by, parked_at,
                                deadline_at, note)
    SELECT aclaim_park_token_hash($8::text), id, org_id, generation, $4::text,
           aclaim_ts($5::bigint), aclaim_ts($6::bigint), $7::text
      FROM parked
    ON CONFLICT (job_id, generation) DO UPDATE
       SET token_hash = excluded.token_hash, parked_at = excluded.parked_at,
           deadline_at = excluded.deadline_at, note = excluded.note
     WHERE p.used_at IS NULL
    RETURNING p.job_id
), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, detail)
    SELECT id, org_id, generation, 'parked', $4::text, aclaim_ts($5::bigint),
           'until ' || aclaim_ts($6::bigint) || CASE WHEN $7::text = '' THEN ''
                                                     ELSE ': ' || $7::text END
      FROM parked
)
SELECT id, queue FROM parked
)SQL",
                             {"org bigint", "job bigint", "generation bigint", "worker text",
                              "now_us bigint", "deadline_us bigint", "note text", "token text"}};

/// $1 now, $2 limit. The reaper: parked jobs whose park's deadline passed are an attempt that
/// failed (reclaim_statement, 'park deadline passed'): the queue's retry policy applies, and past
/// max_attempts the job is discarded. Their tokens are refused 'stale' from then on. Earliest
/// deadline first, through jobs_parked_deadline; rows another transaction holds (a callback
/// deciding) are passed over and seen at the next pass.
inline const Statement kExpireParks{"aclaim_expire_parks",
                                    reclaim_statement(R"SQL(SELECT id, assignee FROM jobs
     WHERE state = 'parked' AND deadline_at <= aclaim_ts($1::bigint)
     ORDER BY deadline_at, id
     LIMIT $2::int
     FOR UPDATE SKIP LOCKED)SQL",
                                                      "'reaper'"),
                                    {"now_us bigint", "limit int"}};

/// $1 token, $2 outcome ('completed', 'failed' or 'retry'), $3 result (the result reference, or
/// the reason), $4 now, $5 the caller named in the audit. The callback of
/// schema/baseline/tables.sql, for every organization (the token names the job).
inline const Statement kFinishParked{
    "aclaim_finish_parked",
    R"SQL(
SELECT accepted, job_id, reason, coalesce(state, '') AS state, detail
  FROM aclaim_finish_parked($1::text, $2::text, $3::text, NULL, $4::bigint, $5::text)
)SQL",
    {"token text", "outcome text", "result text", "now_us bigint", "caller text"}};

/// The statements a store prepares for parked jobs.
inline const std::vector<const Statement*> kParkStatements = {&kPark, &kExpireParks};

}  // namespace aclaim::store::sql
