#pragma once

// Every statement of the assignment contract, in one place. Time arrives as $n microseconds since
// the epoch and is converted by aclaim_ts(); nothing here calls now().

#include <string>
#include <string_view>
#include <vector>

namespace aclaim::common::sql {

/// One prepared statement: the name it is prepared under, its text and its parameter contract.
/// A text may hold {LOCK}, filled with the store's lock strategy when it is prepared.
struct Statement {
    const char* name;
    std::string text;
    /// $1, $2, ... in order, each "name type"; a unit test holds the text to this count.
    std::vector<std::string_view> params;
};

/// The role a row-security store acts as (schema/0003_worker_keys_rls.sql): row-level security
/// applies to it, keyed on the transaction's aclaim.org_id.
inline constexpr const char* kRowSecurityRole = "aclaim_coordinator";
/// The aclaim.org_id value that sees every organization: the reaper, and the read of a row's
/// authority that diagnoses a refused transition.
inline constexpr const char* kAllOrganizations = "system";

/// $1 text: the organization (or kAllOrganizations) the rest of the transaction may see.
inline const Statement kScope{
    "aclaim_scope", "SELECT set_config('aclaim.org_id', $1::text, true)", {"org text"}};

/// $1 org, $2 now, $3 int[] priorities, $4 text[] payloads, $5 int[] max_attempts.
inline const Statement kEnqueue{
    "aclaim_enqueue",
    R"SQL(
WITH ins AS (
    INSERT INTO jobs (org_id, priority, enqueued_at, payload, max_attempts)
    SELECT $1::bigint, p.priority, aclaim_ts($2::bigint), p.payload, p.max_attempts
      FROM unnest($3::int[], $4::text[], $5::int[]) WITH ORDINALITY AS p(priority, payload, max_attempts, n)
     ORDER BY p.n
    RETURNING id, org_id
), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, at)
    SELECT id, org_id, 0, 'enqueued', aclaim_ts($2::bigint) FROM ins
)
SELECT ins.id FROM ins CROSS JOIN (SELECT aclaim_wake($1::bigint)) AS woke ORDER BY ins.id
)SQL",
    {"org bigint", "now_us bigint", "priorities int[]", "payloads text[]", "max_attempts int[]"}};

/// $1 org, $2 worker, $3 limit, $4 now, $5 lease length. {LOCK} is the lock strategy's clause.
/// The candidate CTE is MATERIALIZED so that the locked set is computed exactly once. A locking
/// read rechecks its conditions on the newest row version, so every picked row is pending and
/// locked; the update finds it by primary key alone. (A condition on jobs.state there would make
/// the partial index jobs_claim_order a candidate for a full scan per job, see kRenewBatch.)
inline const Statement kClaim{
    "aclaim_claim",
    R"SQL(
WITH picked AS MATERIALIZED (
    SELECT id FROM jobs
     WHERE org_id = $1::bigint AND state = 'pending'
     ORDER BY priority DESC, enqueued_at, id
     LIMIT $3::int
     FOR UPDATE {LOCK}
), claimed AS (
    UPDATE jobs j
       SET state = 'assigned', generation = j.generation + 1, assignee = $2::text,
           claimed_at = aclaim_ts($4::bigint),
           lease_expires_at = aclaim_ts($4::bigint + $5::bigint),
           attempts = j.attempts + 1
      FROM picked
     WHERE j.id = picked.id
    RETURNING j.id, j.org_id, j.generation, j.priority, aclaim_us(j.enqueued_at) AS enqueued_us,
              aclaim_us(j.lease_expires_at) AS lease_us, j.attempts, j.max_attempts, j.payload
), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at)
    SELECT id, org_id, generation, 'claimed', $2::text, aclaim_ts($4::bigint) FROM claimed
)
SELECT id, org_id, generation, priority, enqueued_us, lease_us, attempts, max_attempts, payload
  FROM claimed ORDER BY priority DESC, enqueued_us, id
)SQL",
    {"org bigint", "worker text", "limit int", "now_us bigint", "lease_us bigint"}};

/// $1 org, $2 job, $3 generation, $4 worker, $5 now, $6 lease length.
/// Only lease_expires_at changes, and it is not indexed, so a renewal can be a HOT update.
inline const Statement kRenew{"aclaim_renew",
                              R"SQL(
UPDATE jobs SET lease_expires_at = aclaim_ts($5::bigint + $6::bigint)
 WHERE id = $2::bigint AND org_id = $1::bigint AND state = 'assigned'
   AND generation = $3::bigint AND assignee = $4::text
   AND lease_expires_at > aclaim_ts($5::bigint)
RETURNING aclaim_us(lease_expires_at) AS lease_us
)SQL",
                              {"org bigint", "job bigint", "generation bigint", "worker text",
                               "now_us bigint", "lease_us bigint"}};

/// $1 org, $2 job, $3 generation, $4 worker, $5 result_ref, $6 now.
/// The completion, its outbox row, its audit event and the notification commit together.
inline const Statement kComplete{"aclaim_complete",
                                 R"SQL(
WITH done AS (
    UPDATE jobs
       SET state = 'completed', completed_at = aclaim_ts($6::bigint), result_ref = $5::text,
           lease_expires_at = NULL
     WHERE id = $2::bigint AND org_id = $1::bigint AND state = 'assigned'
       AND generation = $3::bigint AND assignee = $4::text
       AND lease_expires_at > aclaim_ts($6::bigint)
    RETURNING id, org_id, generation
), published AS (
    INSERT INTO job_results (job_id, org_id, generation, result_ref, published_at)
    SELECT id, org_id, generation, $5::text, aclaim_ts($6::bigint) FROM done
), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, detail)
    SELECT id, org_id, generation, 'completed', $4::text, aclaim_ts($6::bigint), $5::text FROM done
)
SELECT id, pg_notify('aclaim_results', org_id || ':' || id || ':' || generation) FROM done
)SQL",
                                 {"org bigint", "job bigint", "generation bigint", "worker text",
                                  "result_ref text", "now_us bigint"}};

/// $1 org, $2 job, $3 generation, $4 worker, $5 reason, $6 retryable, $7 now.
inline const Statement kFail{"aclaim_fail",
                             R"SQL(
WITH f AS (
    UPDATE jobs
       SET state = CASE WHEN $6::bool AND attempts < max_attempts THEN 'pending' ELSE 'failed' END,
           assignee = CASE WHEN $6::bool AND attempts < max_attempts THEN NULL ELSE assignee END,
           claimed_at = CASE WHEN $6::bool AND attempts < max_attempts THEN NULL ELSE claimed_at END,
           completed_at = CASE WHEN $6::bool AND attempts < max_attempts THEN NULL
                               ELSE aclaim_ts($7::bigint) END,
           lease_expires_at = NULL,
           last_error = $5::text
     WHERE id = $2::bigint AND org_id = $1::bigint AND state = 'assigned'
       AND generation = $3::bigint AND assignee = $4::text
       AND lease_expires_at > aclaim_ts($7::bigint)
    RETURNING id, org_id, generation, state
), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, detail)
    SELECT id, org_id, generation, CASE WHEN state = 'pending' THEN 'released' ELSE 'failed' END,
           $4::text, aclaim_ts($7::bigint),
           CASE WHEN state = 'pending' THEN 'retryable failure: ' ELSE 'failure: ' END || $5::text
      FROM f
)
SELECT state, CASE WHEN state = 'pending' THEN aclaim_wake(org_id) END FROM f
)SQL",
                             {"org bigint", "job bigint", "generation bigint", "worker text",
                              "reason text", "retryable bool", "now_us bigint"}};

/// $1 org, $2 job, $3 generation, $4 worker, $5 now. A voluntary release does not use up an
/// attempt.
inline const Statement kRelease{
    "aclaim_release",
    R"SQL(
WITH r AS (
    UPDATE jobs
       SET state = 'pending', assignee = NULL, claimed_at = NULL, lease_expires_at = NULL,
           attempts = attempts - 1
     WHERE id = $2::bigint AND org_id = $1::bigint AND state = 'assigned'
       AND generation = $3::bigint AND assignee = $4::text
       AND lease_expires_at > aclaim_ts($5::bigint)
    RETURNING id, org_id, generation
), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at)
    SELECT id, org_id, generation, 'released', $4::text, aclaim_ts($5::bigint) FROM r
)
SELECT id, aclaim_wake(org_id) FROM r
)SQL",
    {"org bigint", "job bigint", "generation bigint", "worker text", "now_us bigint"}};

/// Takes back expired leases: {PICK} selects and locks the rows, $1 is now, {DETAIL} is the
/// events' detail. Past max_attempts the job fails instead. {PICK} must lock its rows with the
/// conditions `state = 'assigned' AND lease_expires_at <= now`: a locking read rechecks them on
/// the current row version, and the lock keeps them true until the UPDATE, which then finds its
/// rows by primary key alone (as kClaim, and for the reason given at kRenewBatch). Each
/// event carries its row's own organization. The reaper's kReclaim and the recovery tool's
/// one-job reclaim (recovery_sql.hpp) are this one text.
inline std::string reclaim_statement(std::string_view pick, std::string_view detail) {
    std::string text = R"SQL(
WITH expired AS MATERIALIZED (
    {PICK}
), r AS (
    UPDATE jobs j
       SET state = CASE WHEN j.attempts >= j.max_attempts THEN 'failed' ELSE 'pending' END,
           assignee = CASE WHEN j.attempts >= j.max_attempts THEN j.assignee END,
           claimed_at = CASE WHEN j.attempts >= j.max_attempts THEN j.claimed_at END,
           completed_at = CASE WHEN j.attempts >= j.max_attempts THEN aclaim_ts($1::bigint) END,
           last_error = CASE WHEN j.attempts >= j.max_attempts
                             THEN 'lease expired on attempt ' || j.attempts ELSE j.last_error END,
           lease_expires_at = NULL
      FROM expired
     WHERE j.id = expired.id
    RETURNING j.id, j.org_id, j.generation, expired.assignee, j.state
), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, detail)
    SELECT id, org_id, generation, CASE WHEN state = 'pending' THEN 'reclaimed' ELSE 'failed' END,
           assignee, aclaim_ts($1::bigint), {DETAIL}
      FROM r
)
SELECT id, org_id, generation, assignee, state,
       CASE WHEN state = 'pending' THEN aclaim_wake(org_id) END
  FROM r ORDER BY id
)SQL";
    text.replace(text.find("{PICK}"), 6, pick);
    text.replace(text.find("{DETAIL}"), 8, detail);
    return text;
}

/// $1 now, $2 limit. The reaper: expired leases in job id order (the order of jobs_assigned, so a
/// pass stops after its limit instead of reading and sorting every expired row: the reaper repeats
/// passes until one comes back short, and ordering by expiry made draining a backlog of n
/// expired leases cost n/limit full sorts), across organizations, passing over rows another
/// transaction holds.
inline const Statement kReclaim{"aclaim_reclaim",
                                reclaim_statement(R"SQL(SELECT id, assignee FROM jobs
     WHERE state = 'assigned' AND lease_expires_at <= aclaim_ts($1::bigint)
     ORDER BY id
     LIMIT $2::int
     FOR UPDATE SKIP LOCKED)SQL",
                                                  "'lease expired'"),
                                {"now_us bigint", "limit int"}};

/// $1 bigint[] jobs. The current authority of each row, id first: read after a fenced update
/// matched nothing, and to resolve an interrupted commit (one job).
inline const Statement kAuthority{"aclaim_authority",
                                  R"SQL(
SELECT id, org_id, state, generation, coalesce(assignee, '') AS assignee,
       aclaim_us(lease_expires_at) AS lease_us, coalesce(result_ref, '') AS result_ref
  FROM jobs WHERE id = ANY($1::bigint[])
)SQL",
                                  {"jobs bigint[]"}};

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

/// $1 org, $2 text[] one assignee per slot (a requester asking for k jobs holds k consecutive
/// slots), $3 now, $4 lease length. The best job goes to the first slot. {LOCK} as in kClaim.
inline const Statement kClaimBatch{
    "aclaim_claim_batch",
    R"SQL(
WITH picked AS MATERIALIZED (
    SELECT id, priority, enqueued_at FROM jobs
     WHERE org_id = $1::bigint AND state = 'pending'
     ORDER BY priority DESC, enqueued_at, id
     LIMIT cardinality($2::text[])
     FOR UPDATE {LOCK}
), slotted AS (
    SELECT p.id, s.worker, s.slot
      FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, enqueued_at, id) AS slot
              FROM picked) AS p
      JOIN unnest($2::text[]) WITH ORDINALITY AS s(worker, slot) USING (slot)
), claimed AS (
    UPDATE jobs j
       SET state = 'assigned', generation = j.generation + 1, assignee = slotted.worker,
           claimed_at = aclaim_ts($3::bigint),
           lease_expires_at = aclaim_ts($3::bigint + $4::bigint),
           attempts = j.attempts + 1
      FROM slotted
     WHERE j.id = slotted.id
    RETURNING slotted.slot, j.id, j.org_id, j.generation, j.priority,
              aclaim_us(j.enqueued_at) AS enqueued_us, aclaim_us(j.lease_expires_at) AS lease_us,
              j.attempts, j.max_attempts, j.payload, j.assignee
), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at)
    SELECT id, org_id, generation, 'claimed', assignee, aclaim_ts($3::bigint) FROM claimed
)
SELECT slot, id, org_id, generation, priority, enqueued_us, lease_us, attempts, max_attempts,
       payload
  FROM claimed ORDER BY slot
)SQL",
    {"org bigint", "workers text[]", "now_us bigint", "lease_us bigint"}};

/// $1 bigint[] orgs, $2 bigint[] jobs, $3 bigint[] generations, $4 text[] workers, $5 now,
/// $6 lease length. The rows are locked in id order first, so that two coalesced statements
/// over overlapping jobs queue behind each other instead of deadlocking. The fence is checked on
/// the locked rows, which nothing else can change before this statement's update, and the
/// update finds its rows by primary key alone: a condition on jobs.state there would let the
/// planner choose a full scan of the partial index jobs_assigned for every request whenever the
/// statistics were taken with few leases out (measured: 100-400 ms a batch instead of 3 ms).
inline const Statement kRenewBatch{"aclaim_renew_batch",
                                   R"SQL(
WITH r AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[])
                  WITH ORDINALITY AS r(org, job, generation, worker, n)
), locked AS MATERIALIZED (
    SELECT id, org_id, state, generation, assignee, lease_expires_at FROM jobs
     WHERE id IN (SELECT job FROM r) ORDER BY id FOR NO KEY UPDATE
)
UPDATE jobs j SET lease_expires_at = aclaim_ts($5::bigint + $6::bigint)
  FROM r JOIN locked l ON l.id = r.job
 WHERE j.id = l.id AND l.org_id = r.org AND l.state = 'assigned'
   AND l.generation = r.generation AND l.assignee = r.worker
   AND l.lease_expires_at > aclaim_ts($5::bigint)
RETURNING r.n, aclaim_us(j.lease_expires_at) AS lease_us
)SQL",
                                   {"orgs bigint[]", "jobs bigint[]", "generations bigint[]",
                                    "workers text[]", "now_us bigint", "lease_us bigint"}};

/// $1 bigint[] orgs, $2 bigint[] jobs, $3 bigint[] generations, $4 text[] workers,
/// $5 text[] result_refs, $6 now. As kComplete, per row: the completion, its outbox row, its
/// audit event and its notification; rows locked and fenced as in kRenewBatch.
inline const Statement kCompleteBatch{"aclaim_complete_batch",
                                      R"SQL(
WITH r AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[], $5::text[])
                  WITH ORDINALITY AS r(org, job, generation, worker, result_ref, n)
), locked AS MATERIALIZED (
    SELECT id, org_id, state, generation, assignee, lease_expires_at FROM jobs
     WHERE id IN (SELECT job FROM r) ORDER BY id FOR NO KEY UPDATE
), done AS (
    UPDATE jobs j
       SET state = 'completed', completed_at = aclaim_ts($6::bigint), result_ref = r.result_ref,
           lease_expires_at = NULL
      FROM r JOIN locked l ON l.id = r.job
     WHERE j.id = l.id AND l.org_id = r.org AND l.state = 'assigned'
       AND l.generation = r.generation AND l.assignee = r.worker
       AND l.lease_expires_at > aclaim_ts($6::bigint)
    RETURNING r.n, j.id, j.org_id, j.generation, r.worker, r.result_ref
), published AS (
    INSERT INTO job_results (job_id, org_id, generation, result_ref, published_at)
    SELECT id, org_id, generation, result_ref, aclaim_ts($6::bigint) FROM done
), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, detail)
    SELECT id, org_id, generation, 'completed', worker, aclaim_ts($6::bigint), result_ref FROM done
)
SELECT n, pg_notify('aclaim_results', org_id || ':' || id || ':' || generation) FROM done
)SQL",
                                      {"orgs bigint[]", "jobs bigint[]", "generations bigint[]",
                                       "workers text[]", "result_refs text[]", "now_us bigint"}};

/// Every statement a store prepares at connect, in one table.
inline const std::vector<const Statement*> kStatements = {
    &kScope,   &kEnqueue,   &kClaim,         &kRenew,      &kComplete,   &kFail,          &kRelease,
    &kReclaim, &kAuthority, &kRejectedBatch, &kClaimBatch, &kRenewBatch, &kCompleteBatch,
};

}  // namespace aclaim::common::sql
