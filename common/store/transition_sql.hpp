#pragma once

// The fenced transitions of a held job: each updates the row only while the request holds it
// (organization, state, generation, assignee, live lease), audits in the same statement, and a
// refusal is decided on the row (kAuthority) and audited (kRejectedBatch).

#include <string>

#include "common/store/shared_sql.hpp"

namespace aclaim::store::sql {

/// $1 org, $2 job, $3 generation, $4 worker, $5 now, $6 lease length.
/// Only lease_expires_at changes, and it is not indexed, so a renewal can be a HOT update. The
/// lease never runs past the attempt's deadline: once it has reached it, the renewal is refused
/// and the reaper takes the job back as it takes back any expired lease.
inline const Statement kRenew{"aclaim_renew",
                              R"SQL(
UPDATE jobs SET lease_expires_at = least(aclaim_ts($5::bigint + $6::bigint), deadline_at)
 WHERE id = $2::bigint AND org_id = $1::bigint AND state = 'assigned'
   AND generation = $3::bigint AND assignee = $4::text
   AND lease_expires_at > aclaim_ts($5::bigint)
RETURNING aclaim_us(lease_expires_at) AS lease_us
)SQL",
                              {"org bigint", "job bigint", "generation bigint", "worker text",
                               "now_us bigint", "lease_us bigint"}};

/// $1 org, $2 job, $3 generation, $4 worker, $5 now, $6 percent, $7 note, $8 checkpoint (empty:
/// keep the stored one). Protocol 1.5's PROGRESS: upserts the job's one row of job_progress while
/// this generation holds a live lease, as kRenew's fence says. The job's row is read FOR SHARE, so
/// a reclaim, a completion or a new claim of it waits for this statement's transaction: a report
/// is stored by a generation that holds the job at its commit, never after the job moved on. The
/// row of a later generation is never overwritten by an earlier one. A report that carries a
/// checkpoint is audited 'checkpoint'; percent and note alone are not (they only replace the last
/// ones, and a reviewer may send them every few seconds).
inline const Statement kProgress{"aclaim_progress",
                                 R"SQL(
WITH held AS (
    SELECT id, org_id, generation FROM jobs
     WHERE id = $2::bigint AND org_id = $1::bigint AND state = 'assigned'
       AND generation = $3::bigint AND assignee = $4::text
       AND lease_expires_at > aclaim_ts($5::bigint)
       FOR SHARE
), saved AS (
    INSERT INTO job_progress AS p (job_id, org_id, generation, percent, note, checkpoint,
                                   updated_at)
    SELECT id, org_id, generation, $6::int, $7::text, $8::text, aclaim_ts($5::bigint)
      FROM held
    ON CONFLICT (job_id) DO UPDATE
       SET generation = excluded.generation, percent = excluded.percent, note = excluded.note,
           checkpoint = CASE WHEN excluded.checkpoint = '' THEN p.checkpoint
                             ELSE excluded.checkpoint END,
           updated_at = excluded.updated_at
     WHERE p.generation <= excluded.generation
    RETURNING p.job_id, p.org_id, p.generation
), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, detail)
    SELECT job_id, org_id, generation, 'checkpoint', $4::text, aclaim_ts($5::bigint),
           $6::int || '%, checkpoint of ' || octet_length($8::text) || ' bytes'
      FROM saved WHERE $8::text <> ''
)
SELECT job_id FROM saved
)SQL",
                                 {"org bigint", "job bigint", "generation bigint", "worker text",
                                  "now_us bigint", "percent int", "note text", "checkpoint text"}};

/// $1 org, $2 job, $3 generation, $4 worker, $5 result_ref, $6 now.
/// The completion, its outcome (the one verdict row: job_results is the view of the completed
/// outcomes, schema/baseline/tables.sql) and its audit event commit together. It notifies
/// only through record_outcomes, and only organizations with consumer groups: a NOTIFY takes a
/// cluster-wide lock at commit that every notifying transaction holds through its WAL flush, so
/// notifying completions commit one at a time. aclaim_results is sent after the commit instead
/// (kNotifyResults).
inline const Statement kComplete{"aclaim_complete",
                                 R"SQL(
WITH done AS (
    UPDATE jobs j
       SET state = 'completed', completed_at = aclaim_ts($6::bigint), result_ref = $5::text,
           lease_expires_at = NULL
     WHERE id = $2::bigint AND org_id = $1::bigint AND state = 'assigned'
       AND generation = $3::bigint AND assignee = $4::text
       AND lease_expires_at > aclaim_ts($6::bigint)
    RETURNING )SQL" + outcome_settled("done", "$6::bigint") +
                                     R"SQL(logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, detail)
    SELECT id, org_id, generation, 'completed', $4::text, aclaim_ts($6::bigint), $5::text FROM done
)
SELECT id, queue, )SQL" + kSettledColumn +
                                     R"SQL( FROM done
)SQL",
                                 {"org bigint", "job bigint", "generation bigint", "worker text",
                                  "result_ref text", "now_us bigint"}};

/// $1 org, $2 job, $3 generation, $4 worker, $5 reason, $6 retryable, $7 now. A retryable failure
/// uses up the attempt and the retry policy applies; a failure that is not retryable is final.
inline const Statement kFail{"aclaim_fail",
                             R"SQL(
WITH r AS (
    UPDATE jobs j SET)SQL" + retry_or_discard("$6::bool", "$7::bigint") +
                                 R"SQL(,
           last_error = $5::text
     WHERE id = $2::bigint AND org_id = $1::bigint AND state = 'assigned'
       AND generation = $3::bigint AND assignee = $4::text
       AND lease_expires_at > aclaim_ts($7::bigint)
    RETURNING )SQL" + retried("", "$7::bigint", "'released'") +
                                 R"SQL(
           $4::text, aclaim_ts($7::bigint),
           CASE WHEN state = 'failed' THEN 'failure: ' ELSE 'retryable failure: ' END || $5::text
           || )SQL" + kRetryDetail +
                                 R"SQL(
      FROM r
)
SELECT state, queue, )SQL" + kRetryWake +
                                 ", " + kSettledColumn +
                                 R"SQL( FROM r
)SQL",
                             {"org bigint", "job bigint", "generation bigint", "worker text",
                              "reason text", "retryable bool", "now_us bigint"}};

/// $1 org, $2 job, $3 generation, $4 worker, $5 now. A voluntary release does not use up an
/// attempt, and the job keeps its place (its run_at).
inline const Statement kRelease{
    "aclaim_release",
    compose(R"SQL(
WITH r AS (
    UPDATE jobs
       SET {RELEASE}
     WHERE id = $2::bigint AND org_id = $1::bigint AND state = 'assigned'
       AND generation = $3::bigint AND assignee = $4::text
       AND lease_expires_at > aclaim_ts($5::bigint)
    RETURNING id, org_id, queue, generation
), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at)
    SELECT id, org_id, generation, 'released', $4::text, aclaim_ts($5::bigint) FROM r
)
SELECT id, queue, aclaim_wake(org_id, queue) FROM r
)SQL",
            {{"RELEASE", kReleaseSet}}),
    {"org bigint", "job bigint", "generation bigint", "worker text", "now_us bigint"}};

/// $1 bigint[] jobs. The current authority of each row, id first: read to resolve an
/// interrupted commit (one job), whose own transaction is over once its connection is gone.
inline const Statement kAuthority{"aclaim_authority",
                                  R"SQL(
SELECT id, org_id, state, generation, coalesce(assignee, '') AS assignee,
       aclaim_us(lease_expires_at) AS lease_us, aclaim_us(deadline_at) AS deadline_us,
       coalesce(result_ref, '') AS result_ref
  FROM jobs WHERE id = ANY($1::bigint[])
)SQL",
                                  {"jobs bigint[]"}};

/// kAuthority for a fenced update that matched nothing, whose refusal is decided on these rows.
/// They are read FOR SHARE, which waits for a transaction that holds one to end: a commit still in
/// flight (one waiting for a synchronous standby after a switchover, whose coordinator gave up on
/// it at its deadline) would otherwise leave the row's previous version to judge a re-sent
/// completion by, and tell the worker lease_expired for a completion that becomes visible a
/// moment later (the nemesis on the HA cluster, drills/RUNBOOK.md). A wait that outlasts the
/// statement's deadline is answered as any database that does not answer in time, never from a
/// row that is being replaced.
inline const Statement kAuthorityShared{
    "aclaim_authority_shared", kAuthority.text + "   FOR SHARE\n", {"jobs bigint[]"}};

/// $1 bigint[] jobs, $2 bigint[] orgs, $3 bigint[] generations, $4 text[] workers, $5 now,
/// $6 text[] details. One audited refusal per element, for single and coalesced transitions.
inline const Statement kRejectedBatch{"aclaim_rejected_batch",
                                      R"SQL(
INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, detail)
SELECT r.job, r.org, r.generation, 'rejected', r.worker, aclaim_ts($5::bigint), r.detail
  FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[], $6::text[])
       AS r(job, org, generation, worker, detail)
)SQL",
                                      {"jobs bigint[]", "orgs bigint[]", "generations bigint[]",
                                       "workers text[]", "now_us bigint", "details text[]"}};

// Coalesced statements: many requests, one statement, one commit. Each row's transition is the
// same fenced update as the single statement's; RETURNING names the request (its ordinal n in the
// arrays) that was applied, and the caller takes the others through the single path for their
// exact answer.

/// $1 bigint[] orgs, $2 bigint[] jobs, $3 bigint[] generations, $4 text[] workers, $5 now,
/// $6 lease length. The rows are locked in id order first, so that two coalesced statements
/// over overlapping jobs queue behind each other instead of deadlocking. Each locked row carries
/// the first request that names it (a later duplicate is left to the caller's single path, which
/// answers it after the first, as the single statement would), so the arrays are joined once,
/// there: joining them again in the update, where the planner takes unnest for its default ten
/// rows, made a nested loop that compared every request with every locked row (54,000
/// comparisons, 10 of a 16 ms statement at 232 completions). The fence is checked on the locked
/// rows, which nothing else can change before this statement's update, and the update finds its
/// rows by primary key alone: a condition on jobs.state there would let the planner choose a full
/// scan of the partial index jobs_assigned_queue for every request whenever the statistics were
/// taken with few leases out (measured: 100-400 ms a batch instead of 3 ms).
inline const Statement kRenewBatch{"aclaim_renew_batch",
                                   R"SQL(
WITH r AS (
    SELECT DISTINCT ON (job) *
      FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[])
           WITH ORDINALITY AS r(org, job, generation, worker, n)
     ORDER BY job, n
), locked AS MATERIALIZED (
    SELECT j.id, j.org_id, j.state, j.generation, j.assignee, j.lease_expires_at, j.deadline_at,
           r.org AS asked_org, r.generation AS asked_generation, r.worker, r.n
      FROM r JOIN jobs j ON j.id = r.job
     ORDER BY j.id FOR NO KEY UPDATE OF j
)
UPDATE jobs j SET lease_expires_at = least(aclaim_ts($5::bigint + $6::bigint), l.deadline_at)
  FROM locked l
 WHERE j.id = l.id AND l.org_id = l.asked_org AND l.state = 'assigned'
   AND l.generation = l.asked_generation AND l.assignee = l.worker
   AND l.lease_expires_at > aclaim_ts($5::bigint)
RETURNING l.n, aclaim_us(j.lease_expires_at) AS lease_us
)SQL",
                                   {"orgs bigint[]", "jobs bigint[]", "generations bigint[]",
                                    "workers text[]", "now_us bigint", "lease_us bigint"}};

/// $1 bigint[] orgs, $2 bigint[] jobs, $3 bigint[] generations, $4 text[] workers,
/// $5 text[] result_refs, $6 now. As kComplete, per row: the completion, its outcome and its
/// audit event; rows locked and fenced as in kRenewBatch. One result row per completion applied
/// (`applied` true, `n` its element), then one per element whose row it locked and did not
/// change (`applied` false) with that row's authority as kAuthority reads it, so that a refusal
/// is decided on the row this statement saw: a claim later in the same transaction may take the
/// job again (a COMPLETE with next), and the refusal must read as if the COMPLETE came alone.
/// An applied row also names its job's `queue`.
inline const Statement kCompleteBatch{"aclaim_complete_batch",
                                      R"SQL(
WITH r AS (
    SELECT DISTINCT ON (job) *
      FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[], $5::text[])
           WITH ORDINALITY AS r(org, job, generation, worker, result_ref, n)
     ORDER BY job, n
), locked AS MATERIALIZED (
    SELECT j.id, j.org_id, j.state, j.generation, j.assignee, j.lease_expires_at, j.deadline_at,
           j.result_ref AS row_result_ref, r.org AS asked_org, r.generation AS asked_generation,
           r.worker, r.result_ref, r.n
      FROM r JOIN jobs j ON j.id = r.job
     ORDER BY j.id FOR NO KEY UPDATE OF j
), done AS (
    UPDATE jobs j
       SET state = 'completed', completed_at = aclaim_ts($6::bigint), result_ref = l.result_ref,
           lease_expires_at = NULL
      FROM locked l
     WHERE j.id = l.id AND l.org_id = l.asked_org AND l.state = 'assigned'
       AND l.generation = l.asked_generation AND l.assignee = l.worker
       AND l.lease_expires_at > aclaim_ts($6::bigint)
    RETURNING l.n, l.worker, )SQL" + outcome_settled("done", "$6::bigint") +
                                          R"SQL(logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, detail)
    SELECT id, org_id, generation, 'completed', worker, aclaim_ts($6::bigint), result_ref FROM done
)
SELECT n, true AS applied, )SQL" + kSettledColumn +
                                          R"SQL(, NULL::bigint AS org_id,
       NULL::text AS state, NULL::bigint AS generation, NULL::text AS assignee,
       NULL::bigint AS lease_us, NULL::bigint AS deadline_us, NULL::text AS result_ref, queue
  FROM done
UNION ALL
SELECT l.n, false, NULL, l.org_id, l.state::text, l.generation, coalesce(l.assignee, ''),
       aclaim_us(l.lease_expires_at), aclaim_us(l.deadline_at), coalesce(l.row_result_ref, ''),
       NULL
  FROM locked l
 WHERE l.n NOT IN (SELECT n FROM done)
)SQL",
                                      {"orgs bigint[]", "jobs bigint[]", "generations bigint[]",
                                       "workers text[]", "result_refs text[]", "now_us bigint"}};

}  // namespace aclaim::store::sql
