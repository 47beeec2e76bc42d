#pragma once

// The statements of the operator's console (aclaimctl status, inspect, jobs list, release, fail).
// Like the store's, they take time as $n microseconds and never call now(). The two transitions
// are fenced on the generation the operator saw, so an operator can never act on a later holder.

#include "common/ops/recovery_sql.hpp"
#include "common/store/job_states.hpp"
#include "common/store/shared_sql.hpp"

namespace aclaim::ops::sql {

using store::sql::Statement;

/// One column per job state (store::kJobStates), named after it: "count(*) FILTER (WHERE
/// state = 'pending') AS pending," and so on.
inline std::string count_per_state() {
    std::string out;
    for (const auto& s : store::kJobStates) {
        out += "\n       count(*) FILTER (WHERE state = '";
        out += s.name;
        out += "') AS ";
        out += s.name;
        out += ",";
    }
    return out;
}

/// $1 job. Its saved progress (schema/baseline/tables.sql): the checkpoint's size, not its text.
inline constexpr const char* kOperatorProgress = R"SQL(
SELECT generation, percent, note, octet_length(checkpoint) AS checkpoint_bytes,
       aclaim_us(updated_at) AS updated_us
  FROM job_progress WHERE job_id = $1
)SQL";

/// $1 job. Its latest park (schema/baseline/tables.sql): never the token, which is not stored.
inline constexpr const char* kOperatorPark = R"SQL(
SELECT generation, parked_by, note, aclaim_us(parked_at) AS parked_us,
       aclaim_us(deadline_at) AS deadline_us, aclaim_us(used_at) AS used_us,
       coalesce(used_by, '') AS used_by, coalesce(outcome, '') AS outcome
  FROM job_parks WHERE job_id = $1 ORDER BY generation DESC LIMIT 1
)SQL";

/// $1 now, $2 organization (0: all). One row per organization. Lease liveness is decided against
/// the caller's clock, the same way the reaper decides it.
/// Fresh statistics for jobs after a bulk enqueue (aclaimctl enqueue, past kAnalyzeAfterJobs).
/// A queue that was empty at the last ANALYZE is estimated to hold almost nothing, and the claim's
/// planner then reads every row of it by bitmap and sorts them instead of probing
/// jobs_claim_order: with 90,000 new jobs that was 3,665 buffers a claim instead of 14 until
/// autovacuum analyzed the table (drills/faults, the backlog scenario).
inline const Statement kAnalyzeJobs{"aclaim_analyze_jobs", "ANALYZE jobs", {}};

inline const Statement kOperatorStatus{"aclaim_operator_status",
                                       R"SQL(
SELECT org_id,)SQL" + count_per_state() + R"SQL(
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

/// $1 now, $2 bigint[] organizations. Completions per organization and queue within the minute
/// before $1, for the completion rate and the time left at it (aclaimctl status, the console's
/// overview): a skip scan over each organization's queues with completed jobs
/// (aclaim_next_queue), then one range of jobs_finished (org_id, queue, state, completed_at) per
/// queue, so that the cost follows the last minute's completions, never the table.
inline const Statement kQueueCompletions{"aclaim_queue_completions",
                                         R"SQL(
WITH RECURSIVE q AS (
    SELECT o, aclaim_next_queue(o, 'completed', NULL) AS queue FROM unnest($2::bigint[]) AS o
    UNION ALL
    SELECT q.o, aclaim_next_queue(q.o, 'completed', q.queue) FROM q WHERE q.queue IS NOT NULL
)
SELECT q.o AS org_id, q.queue, c.n
  FROM q,
       LATERAL (SELECT count(*) AS n FROM jobs j
                 WHERE j.org_id = q.o AND j.queue = q.queue AND j.state = 'completed'
                   AND j.completed_at > aclaim_ts($1::bigint - 60000000)
                   AND j.completed_at <= aclaim_ts($1::bigint)) c
 WHERE q.queue IS NOT NULL AND c.n > 0
 ORDER BY 1, 2
)SQL",
                                         {"now_us bigint", "orgs bigint[]"}};

/// $1 job. Its exclusions (schema/baseline/tables.sql): a reviewer named, or a job named with
/// that job's state and, once it completed, its completer.
inline constexpr const char* kOperatorExclusions = R"SQL(
SELECT x.excluded_key, x.completer_of, d.state AS named_state,
       CASE WHEN d.state = 'completed' THEN d.assignee END AS completer
  FROM job_exclusions x LEFT JOIN jobs d ON d.id = x.completer_of
 WHERE x.job_id = $1::bigint
 ORDER BY x.excluded_key NULLS LAST, x.completer_of
)SQL";

/// $1 job, $2 at most this many. One side of a job's dependencies (schema/baseline/tables.sql):
/// each edge's other end, its policy, how that dependency ended (resolved NULL: not yet) and the
/// other job's state now (NULL: pruned by retention), in id order. {NEAR} is the column that names
/// the job, {FAR} the other end: job_id and depends_on for what it waits for (the primary key), the
/// reverse for what waits for it (job_dependencies_dependents, schema/baseline/tables.sql).
inline constexpr const char* kOperatorDependencyEdges = R"SQL(
SELECT d.{FAR} AS job, d.policy, d.resolved, j.state
  FROM job_dependencies d LEFT JOIN jobs j ON j.id = d.{FAR}
 WHERE d.{NEAR} = $1::bigint
 ORDER BY d.{FAR}
 LIMIT $2::int
)SQL";
inline const std::string kOperatorDependencies =
    store::sql::compose(kOperatorDependencyEdges, {{"NEAR", "job_id"}, {"FAR", "depends_on"}});
inline const std::string kOperatorDependents =
    store::sql::compose(kOperatorDependencyEdges, {{"NEAR", "depends_on"}, {"FAR", "job_id"}});

/// The two readers below read the columns of kJobColumnsWithPayload (job_record_sql.hpp). $1 job.
inline const std::string kOperatorJob = store::sql::compose(
    "SELECT {COLUMNS} FROM jobs WHERE id = $1::bigint", {{"COLUMNS", kJobColumnsWithPayload}});

/// $1 org or NULL, $2 state or NULL, $3 assignee or NULL, $4 enqueued before (us) or NULL,
/// $5 after this id, $6 limit, $7 queue or NULL. Paging by id keeps every page one range of the
/// primary key.
inline const std::string kOperatorList = store::sql::compose(R"SQL(
SELECT {COLUMNS}
  FROM jobs
 WHERE ($1::bigint IS NULL OR org_id = $1::bigint)
   AND ($2::text IS NULL OR state = $2::text)
   AND ($3::text IS NULL OR assignee = $3::text)
   AND ($4::bigint IS NULL OR enqueued_at < aclaim_ts($4::bigint))
   AND ($7::text IS NULL OR queue = $7::text)
   AND id > $5::bigint
 ORDER BY id
 LIMIT $6::int
)SQL",
                                                             {{"COLUMNS", kJobColumnsWithPayload}});

/// $1 job, $2 generation, $3 operator, $4 now, $5 detail. A stuck assignment back to pending.
/// Like a worker's own release it gives the attempt back: the job was not at fault (use fail
/// for a job that should not run again). The next claim gets a higher generation.
inline const Statement kOperatorRelease{
    "aclaim_operator_release",
    store::sql::compose(R"SQL(
WITH r AS (
    UPDATE jobs
       SET {RELEASE}
     WHERE id = $1::bigint AND state = 'assigned' AND generation = $2::bigint
    RETURNING id, org_id, generation
), )SQL",
                        {{"RELEASE", store::sql::kReleaseSet}}) +
        operator_logged(store::EventKind::Released, "r") + R"SQL(
SELECT id, aclaim_wake(org_id) FROM r
)SQL",
    {"job bigint", "generation bigint", "operator text", "now_us bigint", "detail text"}};

/// $1 job, $2 generation, $3 operator, $4 now, $5 detail, $6 last_error. A stuck assignment
/// failed for good; the failed CHECK wants completed_at set and no lease or result.
inline const Statement kOperatorFail{"aclaim_operator_fail",
                                     R"SQL(
WITH f AS (
    UPDATE jobs j
       SET state = 'failed', completed_at = aclaim_ts($4::bigint), lease_expires_at = NULL,
           last_error = $6::text
     WHERE id = $1::bigint AND state = 'assigned' AND generation = $2::bigint
    RETURNING )SQL" + store::sql::outcome_settled("f", "$4::bigint") +
                                         operator_logged(store::EventKind::Failed, "f") + R"SQL(
SELECT id, )SQL" + store::sql::kSettledColumn +
                                         R"SQL( FROM f
)SQL",
                                     {"job bigint", "generation bigint", "operator text",
                                      "now_us bigint", "detail text", "last_error text"}};

/// $1 bigint[] jobs, $2 operator, $3 reason, $4 now. Cancels each listed job that is pending,
/// scheduled or assigned, in id order: terminal at once, audited with who and why. An assigned
/// job keeps its holder in the row, and the holder's coordinator is told on aclaim_revoke
/// (delivered at commit) so that it pushes REVOKED "cancelled" at once; the holder's completion
/// is refused "cancelled" from then on. The statement is aclaim_cancel_jobs
/// (schema/definitions/functions/aclaim_cancel.sql), which a producer's aclaim_cancel runs too,
/// confined to its organization.
inline const Statement kOperatorCancel{
    "aclaim_operator_cancel",
    R"SQL(
SELECT id, org_id, generation, was, holder
  FROM aclaim_cancel_jobs(NULL, $1::bigint[], $2::text, $3::text, $4::bigint)
)SQL",
    {"jobs bigint[]", "operator text", "reason text", "now_us bigint"}};

/// $1 bigint[] jobs. Before kOperatorRetry, in its transaction: the weight lock of each listed
/// job's queue, shared and in order (schema/baseline/tables.sql), so that the retry
/// reads whether the queue has a weight after any setting of one that is under way committed.
inline const Statement kOperatorRetryLocks{"aclaim_operator_retry_locks",
                                           R"SQL(
SELECT count(pg_advisory_xact_lock_shared(aclaim_weight_lock(org_id, queue)))
  FROM (SELECT DISTINCT org_id, queue FROM jobs WHERE id = ANY($1::bigint[])
         ORDER BY org_id, queue) AS q
)SQL",
                                           {"jobs bigint[]"}};

/// $1 bigint[] jobs, $2 operator, $3 now, $4 reason. Revives each listed job that failed, was
/// discarded or was cancelled: pending now, with a fresh attempt budget, audited 'retried'. A
/// completed job is never run again. A job of a weighted queue is marked for the weighted claim's
/// index (schema/baseline/tables.sql; after kOperatorRetryLocks).
inline const Statement kOperatorRetry{
    "aclaim_operator_retry",
    R"SQL(
WITH r AS (
    UPDATE jobs
       SET state = 'pending', attempts = 0, assignee = NULL, claimed_at = NULL,
           lease_expires_at = NULL, completed_at = NULL, deadline_at = NULL,
           run_at = aclaim_ts($3::bigint),
           weighed = coalesce(weighed, (SELECT true FROM job_queues q
                                          WHERE q.org_id = jobs.org_id AND q.queue = jobs.queue
                                            AND q.weight IS NOT NULL))
     WHERE id = ANY($1::bigint[]) AND state IN ()SQL" +
        store::sql_state_list(store::kRetryableStates) + R"SQL()
    RETURNING id, org_id, queue, generation, max_attempts
), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, detail)
    SELECT id, org_id, generation, 'retried', $2::text, aclaim_ts($3::bigint),
           'fresh budget of ' || max_attempts || ' attempts: ' || $4::text
      FROM r
)
SELECT id, aclaim_wake(org_id, queue) FROM r ORDER BY id
)SQL",
    {"jobs bigint[]", "operator text", "now_us bigint", "reason text"}};

/// $1 org, $2 queue: whether the organization has that queue, i.e. settings or a job in it. Pause,
/// resume and set refuse any other, so that a misspelt name is not a new queue nobody serves.
/// One probe per index that together cover every state (schema/baseline/tables.sql).
inline const Statement kOperatorQueueKnown{"aclaim_operator_queue_known",
                                           R"SQL(
SELECT EXISTS (SELECT 1 FROM job_queues WHERE org_id = $1::bigint AND queue = $2::text)
    OR EXISTS (SELECT 1 FROM jobs
                WHERE org_id = $1::bigint AND queue = $2::text
                  AND state IN ('pending', 'scheduled', 'failed', 'discarded', 'cancelled',
                                'quarantined'))
    OR EXISTS (SELECT 1 FROM jobs
                WHERE org_id = $1::bigint AND queue = $2::text AND state = 'assigned')
    OR EXISTS (SELECT 1 FROM jobs
                WHERE org_id = $1::bigint AND queue = $2::text AND state = 'completed')
)SQL",
                                           {"org bigint", "queue text"}};

/// $1 org. The queues an organization has: configured, or with jobs in them.
inline const Statement kOperatorQueueNames{
    "aclaim_operator_queue_names",
    "SELECT queue FROM job_queues WHERE org_id = $1::bigint "
    "UNION SELECT DISTINCT queue FROM jobs WHERE org_id = $1::bigint",
    {"org bigint"}};

/// $1 org, $2 queue, $3 paused, $4 operator, $5 now, $6 reason. Runs after the organization's
/// queue lock (kOperatorQueueLock), so claims already running finish first and later ones see it.
inline const Statement kOperatorPause{
    "aclaim_operator_pause",
    R"SQL(
WITH q AS (
    INSERT INTO job_queues AS jq (org_id, queue, paused, updated_at)
    VALUES ($1::bigint, $2::text, $3::bool, aclaim_ts($5::bigint))
    ON CONFLICT (org_id, queue) DO UPDATE SET paused = EXCLUDED.paused,
                                               updated_at = EXCLUDED.updated_at
    RETURNING jq.org_id, jq.queue
), logged AS (
    INSERT INTO queue_events (org_id, queue, kind, actor, at, detail)
    SELECT org_id, queue, CASE WHEN $3::bool THEN 'paused' ELSE 'resumed' END, $4::text,
           aclaim_ts($5::bigint), $6::text FROM q
)
SELECT CASE WHEN NOT $3::bool THEN aclaim_wake(org_id, queue) END FROM q
)SQL",
    {"org bigint", "queue text", "paused bool", "operator text", "now_us bigint", "reason text"}};

/// The settings kOperatorConfigure sets plainly, each a column of job_queues and the parameter
/// that sets it: NULL keeps the queue's value, 0 goes back to none or the built-in default, and a
/// queue new to job_queues takes the parameter, 0 as NULL. The rate limit, whose burst and bucket
/// follow from more than one parameter, is not among them.
struct PlainQueueSetting {
    std::string_view column;
    std::string_view param;
};
inline constexpr PlainQueueSetting kPlainQueueSettings[] = {{"max_assigned", "$3::int"},
                                                            {"max_attempts", "$4::int"},
                                                            {"backoff_base_us", "$5::bigint"},
                                                            {"backoff_cap_us", "$6::bigint"},
                                                            {"run_timeout_us", "$7::bigint"},
                                                            {"retain_completed_us", "$11::bigint"},
                                                            {"retain_failed_us", "$12::bigint"},
                                                            {"retain_discarded_us", "$13::bigint"},
                                                            {"retain_cancelled_us", "$14::bigint"},
                                                            {"weight", "$17::int"},
                                                            {"aging_us", "$18::bigint"}};

/// `each` of every plain setting, in kPlainQueueSettings' order, each followed by a comma.
template <class Each>
std::string plain_queue_settings(Each each) {
    std::string out;
    for (const auto& s : kPlainQueueSettings) out += each(s) + ",";
    return out;
}

/// $1 org, $2 queue, $3 max_assigned, $4 max_attempts, $5 backoff base, $6 backoff cap,
/// $7 run timeout, $11..$14 the retention of completed, failed, discarded and cancelled jobs
/// (each NULL: keep; 0: back to none or the built-in default), $8 operator, $9 now, $10 detail,
/// $15 the rate limit in claims a second (NULL: keep; 0: no limit) and $16 its burst (NULL: keep
/// the queue's, or, for a new limit, the rate rounded up). A new limit starts with a full bucket;
/// a changed one keeps the tokens its bucket holds at now (no more than the new burst), so that
/// a change never hands out the time before it at the new rate. $17 the weight (NULL: keep; 0:
/// none) and $18 the aging step in microseconds (NULL: keep; 0: no aging),
/// schema/baseline/tables.sql: a weight set keeps the queue's pass, so that changing a weight never
/// hands the queue a burst (a queue new to weights starts level with the others at its first
/// claim). After kOperatorQueueLock, as kOperatorPause: a claim holds the organization's lock
/// shared, so the bucket changes between claims, never under one. A queue given a weight it did not
/// have has its jobs marked for the weighted claim's index in this statement, by the trigger
/// job_queues_weighed (schema/baseline/tables.sql), after the enqueues into it under way commit.
inline const Statement kOperatorConfigure{
    "aclaim_operator_configure",
    store::sql::compose(R"SQL(
WITH q AS (
    INSERT INTO job_queues AS jq (org_id, queue,{COLUMNS} rate_per_s, rate_burst, updated_at)
    VALUES ($1::bigint, $2::text,{VALUES}
            nullif($15::numeric, 0),
            CASE WHEN nullif($15::numeric, 0) IS NOT NULL
                 THEN coalesce($16::int, greatest(1, ceil($15::numeric))::int) END,
            aclaim_ts($9::bigint))
    ON CONFLICT (org_id, queue) DO UPDATE SET
        rate_per_s = CASE WHEN $15::numeric IS NULL THEN jq.rate_per_s
                          ELSE nullif($15::numeric, 0) END,
        rate_burst = CASE WHEN coalesce(nullif($15::numeric, 0), jq.rate_per_s) IS NULL
                               OR $15::numeric = 0 THEN NULL
                          ELSE coalesce($16::int, jq.rate_burst,
                                        greatest(1, ceil($15::numeric))::int) END,
        rate_tokens = CASE WHEN jq.rate_per_s IS NULL OR $15::numeric = 0 THEN NULL
                           ELSE least(coalesce($16::int, jq.rate_burst),
                                      aclaim_rate_tokens(jq.rate_per_s, jq.rate_burst,
                                                         jq.rate_tokens, jq.rate_refilled_us,
                                                         $9::bigint)) END,
        rate_refilled_us = CASE WHEN jq.rate_per_s IS NULL OR $15::numeric = 0 THEN NULL
                                ELSE greatest(jq.rate_refilled_us, $9::bigint) END,
        aging_done_us = CASE WHEN $18::bigint IS NULL THEN jq.aging_done_us END,{UPDATES}
        updated_at = EXCLUDED.updated_at
    RETURNING jq.org_id, jq.queue
), logged AS (
    INSERT INTO queue_events (org_id, queue, kind, actor, at, detail)
    SELECT org_id, queue, 'configured', $8::text, aclaim_ts($9::bigint), $10::text FROM q
)
SELECT aclaim_wake(org_id, queue) FROM q
)SQL",
                        {{"COLUMNS", plain_queue_settings([](const auto& s) {
                              return " " + std::string(s.column);
                          })},
                         {"VALUES", plain_queue_settings([](const auto& s) {
                              return " nullif(" + std::string(s.param) + ", 0)";
                          })},
                         {"UPDATES", plain_queue_settings([](const auto& s) {
                              const std::string column(s.column), param(s.param);
                              return "\n        " + column + " = CASE WHEN " + param +
                                     " IS NULL THEN jq." + column + " ELSE nullif(" + param +
                                     ", 0) END";
                          })}}),
    {"org bigint", "queue text", "max_assigned int", "max_attempts int", "backoff_base_us bigint",
     "backoff_cap_us bigint", "run_timeout_us bigint", "operator text", "now_us bigint",
     "detail text", "retain_completed_us bigint", "retain_failed_us bigint",
     "retain_discarded_us bigint", "retain_cancelled_us bigint", "rate_per_s numeric",
     "rate_burst int", "weight int", "aging_us bigint"}};

/// $1 org. The organization's queue lock, exclusive (see kClaimLocks).
inline constexpr const char* kOperatorQueueLock =
    "SELECT pg_advisory_xact_lock(aclaim_org_lock($1::bigint))";

/// Jobs per queue and state, the one count the browser console's queue table, `aclaimctl queue
/// list` and the coordinator's per-queue gauges share. $1 bigint[] organizations (NULL: every
/// one), $2 text[] states, $3 count cap (NULL: exact), $4 queues listed per organization and state
/// (NULL: all). One row per queue that holds a job in one of $2 or has settings: `counts` holds
/// each of $2's count, in $2's order, up to $3 + 1; with the queue's settings, the run_at of its
/// oldest claimable job and the retention in force per finished state (the queue's setting or the
/// built-in default, aclaim_retention_us). Each state read from the index that holds it, through
/// schema/definitions/functions/aclaim_next_org.sql's functions: a skip scan over the organizations
/// (aclaim_next_org) and over the queues of each (organization, state) (aclaim_next_queue), then
/// per queue index-only counts (aclaim_count_in) and one probe of jobs_org_state for the oldest
/// pending entry, so that the rows of states not in $2 are never read.
inline const Statement kOperatorQueues{
    "aclaim_operator_queues",
    R"SQL(
WITH RECURSIVE every_org AS (
    SELECT aclaim_next_org(NULL) AS org_id WHERE $1::bigint[] IS NULL
    UNION ALL
    SELECT aclaim_next_org(e.org_id) FROM every_org e WHERE e.org_id IS NOT NULL
), orgs AS (
    SELECT unnest($1::bigint[]) AS o
    UNION
    SELECT org_id FROM every_org WHERE org_id IS NOT NULL
), found AS (
    SELECT o.o, s.s, 1 AS n, aclaim_next_queue(o.o, s.s, NULL) AS queue
      FROM orgs o, unnest($2::text[]) s
    UNION ALL
    SELECT f.o, f.s, f.n + 1, aclaim_next_queue(f.o, f.s, f.queue)
      FROM found f WHERE f.queue IS NOT NULL AND ($4::int IS NULL OR f.n < $4::int)
), queues AS (
    SELECT o AS org_id, queue FROM found WHERE queue IS NOT NULL
    UNION
    SELECT org_id, queue FROM job_queues
     WHERE $1::bigint[] IS NULL OR org_id = ANY($1::bigint[])
)
SELECT q.org_id, q.queue,
       ARRAY(SELECT aclaim_count_in(q.org_id, s.s, q.queue, $3::bigint)
               FROM unnest($2::text[]) WITH ORDINALITY AS s(s, i) ORDER BY s.i) AS counts,
       (SELECT aclaim_us(j.run_at) FROM jobs j
         WHERE j.org_id = q.org_id AND j.state = 'pending' AND j.queue = q.queue
         ORDER BY j.run_at LIMIT 1) AS oldest_pending_us,
       coalesce(jq.paused, false) AS paused, jq.max_assigned, jq.rate_per_s::text AS rate_per_s,
       jq.rate_burst,
       floor(aclaim_rate_tokens(jq.rate_per_s, jq.rate_burst, jq.rate_tokens, jq.rate_refilled_us,
                                $5::bigint))::int AS rate_tokens,
       jq.weight, jq.aging_us,
       jq.max_attempts,
       jq.backoff_base_us, jq.backoff_cap_us, jq.run_timeout_us,
       aclaim_retention_us(q.org_id, q.queue, 'completed') AS retain_completed_us,
       aclaim_retention_us(q.org_id, q.queue, 'failed') AS retain_failed_us,
       aclaim_retention_us(q.org_id, q.queue, 'discarded') AS retain_discarded_us,
       aclaim_retention_us(q.org_id, q.queue, 'cancelled') AS retain_cancelled_us
  FROM queues q
  LEFT JOIN job_queues jq ON jq.org_id = q.org_id AND jq.queue = q.queue
 ORDER BY q.org_id, q.queue
)SQL",
    {"orgs bigint[]", "states text[]", "cap bigint", "queues_per_state int", "now_us bigint"}};

/// Before kOperatorQueues: its recursive skip scans are index probes whose row estimates look
/// costly to the planner, which with JIT on spends seconds compiling what then runs in
/// milliseconds. For the rest of the caller's transaction only.
inline constexpr const char* kOperatorQueuesNoJit = "SET LOCAL jit = off";

/// $1 login, $2 organization, $3 operator, $4 now. Binds a producer login to one organization
/// (schema/baseline/tables.sql: a superuser, a login that bypasses row-level security or one that
/// can act as the coordinator is refused) and makes it a member of aclaim_producer.
inline const Statement kProducerBind{
    "aclaim_producer_bind",
    "SELECT aclaim_producer_bind($1::name, $2::bigint, $3::text, $4::bigint)",
    {"login name", "org bigint", "operator text", "now_us bigint"}};

/// $1 login. Removes the binding and the membership; true when the login was bound.
inline const Statement kProducerUnbind{
    "aclaim_producer_unbind", "SELECT aclaim_producer_unbind($1::name) AS unbound", {"login name"}};

/// Every bound login, whether it can still log in.
inline const Statement kProducerList{"aclaim_producer_list",
                                     R"SQL(
SELECT p.login, p.org_id, aclaim_us(p.bound_at) AS bound_us, p.bound_by,
       coalesce(r.rolcanlogin, false) AS can_login
  FROM producer_logins p LEFT JOIN pg_roles r ON r.rolname = p.login
 ORDER BY p.org_id, p.login
)SQL",
                                     {}};

/// The statements above that take parameters, run unprepared on the caller's connection (their
/// names only identify them); listed for the test that holds each text to its contract.
inline const std::vector<const Statement*> kOperatorStatements = {
    &kOperatorStatus,     &kOperatorRelease,    &kOperatorFail,      &kOperatorCancel,
    &kOperatorRetry,      &kOperatorPause,      &kOperatorConfigure, &kOperatorQueues,
    &kProducerBind,       &kProducerUnbind,     &kProducerList,      &kOperatorQueueKnown,
    &kOperatorRetryLocks, &kOperatorQueueNames, &kQueueCompletions};

}  // namespace aclaim::ops::sql
