#pragma once

// The statements of the assignment contract: enqueue, the sweeps across organizations (reclaim,
// promotion), retention, and the table of every statement a store prepares at connect. The claim
// (claim_sql.hpp, claim_plan.hpp) and the fenced transitions (transition_sql.hpp) have headers of
// their own, included here. Time arrives as $n microseconds since the epoch and is converted by
// aclaim_ts(); nothing here calls now().

#include <string>
#include <string_view>
#include <vector>

#include "common/store/claim_sql.hpp"
#include "common/store/shared_sql.hpp"
#include "common/store/statement.hpp"
#include "common/store/transition_sql.hpp"

namespace aclaim::store::sql {

/// The parameters of kEnqueue (below).
inline const std::vector<std::string_view> kEnqueueParams{"org bigint",
                                                          "now_us bigint",
                                                          "queues text[]",
                                                          "payloads text[]",
                                                          "priorities int[]",
                                                          "run_at_us bigint[]",
                                                          "max_attempts int[]",
                                                          "backoff_base_us bigint[]",
                                                          "backoff_cap_us bigint[]",
                                                          "run_timeout_us bigint[]",
                                                          "dedupe_keys text[]",
                                                          "dedupe_window_us bigint",
                                                          "depends_n int[]",
                                                          "depends_on bigint[]",
                                                          "on_failure text[]"};

/// The call of aclaim_enqueue_jobs both enqueues make; {EXCLUSIONS} its exclusion arguments, or
/// nothing.
inline constexpr const char* kEnqueueCall = R"SQL(
SELECT id, created, state
  FROM aclaim_enqueue_jobs($1::bigint, $2::bigint, $3::text[], $4::text[], $5::int[],
                           $6::bigint[], $7::int[], $8::bigint[], $9::bigint[], $10::bigint[],
                           $11::text[], $12::bigint, $13::int[], $14::bigint[], $15::text[]{EXCLUSIONS})
 ORDER BY n
)SQL";

/// $1 org, $2 now, then one array element per job: $3 queues, $4 payloads, $5 priorities,
/// $6 run_at (NULL: now), $7 max_attempts, $8 backoff bases, $9 backoff caps, $10 run timeouts,
/// $11 dedupe keys (NULL elements: the queue's setting or the built-in default; no key), and $12
/// the dedupe window, then one element per dependency edge (NULL: none;
/// schema/baseline/tables.sql): $13 the dependent's index in the call, $14 the dependency (a job
/// id, or -k for job k of the call), $15 the policy. aclaim_enqueue_jobs
/// (schema/definitions/functions/aclaim_enqueue_jobs.sql) holds the statement, so that the
/// producers' SQL API enqueues exactly as the store does: it refuses a payload over
/// aclaim_max_payload_bytes(), sends each job through aclaim_enqueue_job
/// (schema/definitions/functions/aclaim_enqueue_job.sql), which returns the existing job for a
/// dedupe key that is still held, and takes keys in key order so that producers never wait on each
/// other in a cycle. Rows come back in the caller's order.
inline const Statement kEnqueue{"aclaim_enqueue", compose(kEnqueueCall, {{"EXCLUSIONS", ""}}),
                                kEnqueueParams};

/// kEnqueue for a call of which some job has exclusions (schema/baseline/tables.sql), one
/// array element each: $16 the job's index in the call, $17 the reviewer it excludes, $18 the job
/// whose completer it excludes (a job id, or -k for job k of the call); one of the two per element.
/// A separate statement, so that an enqueue without exclusions passes no exclusion arrays.
inline const Statement kEnqueueExcluding{
    "aclaim_enqueue_excluding",
    compose(
        kEnqueueCall,
        {{"EXCLUSIONS", ",\n                           $16::int[], $17::text[], $18::bigint[]"}}),
    [] {
        std::vector<std::string_view> params = kEnqueueParams;
        params.insert(params.end(),
                      {"exclude_n int[]", "exclude_keys text[]", "exclude_jobs bigint[]"});
        return params;
    }()};

/// Takes back expired leases: {PICK} selects and locks the rows, $1 is now, {DETAIL} is the
/// events' detail. An expired lease uses up its attempt: the retry policy applies, and past
/// max_attempts the job is discarded. A lease that ran into the attempt's deadline says so in the
/// detail, and a parked job (kExpireParks: {PICK} locks `state = 'parked' AND deadline_at <= now`)
/// says that its park's deadline passed. {PICK} must lock its rows with the conditions `state =
/// 'assigned' AND lease_expires_at <= now`, or the parked ones: a locking read rechecks them on the
/// current row version, and the lock keeps them true until the UPDATE, which then finds its rows by
/// primary key alone (as the claim, and for the reason given at kRenewBatch). Each event carries
/// its row's own organization. The reaper's kReclaim and the recovery tool's one-job reclaim
/// (recovery_sql.hpp) are this one text.
inline std::string reclaim_statement(std::string_view pick, std::string_view detail) {
    const std::string text = R"SQL(
WITH expired AS MATERIALIZED (
    {PICK}
), r AS (
    UPDATE jobs j SET)SQL" + retry_or_discard("true", "$1::bigint") +
                             R"SQL(,
           last_error = CASE WHEN j.state = 'parked'
                             THEN 'park deadline passed on attempt ' || j.attempts
                             WHEN j.deadline_at <= aclaim_ts($1::bigint)
                             THEN 'run deadline exceeded on attempt ' || j.attempts
                             ELSE 'lease expired on attempt ' || j.attempts END
      FROM expired
     WHERE j.id = expired.id
    RETURNING )SQL" + retried("expired.assignee, ", "$1::bigint", "'reclaimed'") +
                             R"SQL(
           assignee, aclaim_ts($1::bigint), {DETAIL} || ': ' || last_error || )SQL" +
                             kRetryDetail + R"SQL(
      FROM r
)
SELECT id, org_id, queue, generation, assignee, state, )SQL" +
                             kRetryWake + ", " + kSettledColumn + R"SQL(
  FROM r ORDER BY id
)SQL";
    return compose(text, {{"PICK", pick}, {"DETAIL", detail}});
}

/// $1 now, $2 limit. The reaper: expired leases in the order of jobs_assigned_queue (organization,
/// queue), so that a pass stops after its limit instead of reading and sorting every expired row
/// (the reaper repeats passes until one comes back short, and ordering by expiry made draining a
/// backlog of n expired leases cost n/limit full sorts), across organizations, passing over rows
/// another transaction holds. No order is needed for safety: a pass waits for no lock.
inline const Statement kReclaim{"aclaim_reclaim",
                                reclaim_statement(R"SQL(SELECT id, assignee FROM jobs
     WHERE state = 'assigned' AND lease_expires_at <= aclaim_ts($1::bigint)
     LIMIT $2::int
     FOR UPDATE SKIP LOCKED)SQL",
                                                  "'reaper'"),
                                {"now_us bigint", "limit int"}};

/// $1 now, $2 limit. Scheduled jobs whose run_at has arrived become pending, earliest first,
/// across organizations, each audited 'due'; each queue that got work is woken once. Rows another
/// promoter holds are passed over, so several coordinators promote together without waiting.
inline const Statement kPromoteDue{"aclaim_promote_due",
                                   R"SQL(
WITH due AS MATERIALIZED (
    SELECT id FROM jobs
     WHERE state = 'scheduled' AND run_at <= aclaim_ts($1::bigint)
     ORDER BY run_at, id
     LIMIT $2::int
     FOR UPDATE SKIP LOCKED
), promoted AS (
    UPDATE jobs j SET state = 'pending' FROM due WHERE j.id = due.id
    RETURNING j.id, j.org_id, j.queue, j.generation
), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, at)
    SELECT id, org_id, generation, 'due', aclaim_ts($1::bigint) FROM promoted
)
SELECT count(*) AS promoted,
       (SELECT count(aclaim_wake(org_id, queue))
          FROM (SELECT DISTINCT org_id, queue FROM promoted) AS q) AS woken
  FROM promoted
)SQL",
                                   {"now_us bigint", "limit int"}};

/// The earliest run_at of any scheduled job (NULL when none): one probe of jobs_scheduled.
inline const Statement kNextDue{
    "aclaim_next_due",
    "SELECT aclaim_us(min(run_at)) AS run_at_us FROM jobs WHERE state = 'scheduled'",
    {}};

/// $1 channel, $2 bigint[] organizations. Run by the coordinator's result notifier after
/// completions committed, in a transaction of its own: one notification per organization that has
/// new results, payload the organization id ("look again", never the result itself).
inline const Statement kNotifyResults{
    "aclaim_notify_results",
    "SELECT count(pg_notify($1::text, org::text)) FROM unnest($2::bigint[]) AS org",
    {"channel text", "orgs bigint[]"}};

/// $1 bigint[] organizations, $2 bigint[] jobs, $3 bigint[] generations, $4 text[] workers: one
/// aclaim_revoke notification a row. Returns the positions (1-based) of those whose job's row
/// shows what they claim: that job, of that organization, was cancelled at that generation while
/// that worker held it (aclaim_cancel_jobs keeps the holder in the row). Any database login can
/// NOTIFY, so the listener tells a worker nothing that this read does not bear out. One probe of
/// the primary key per notification; run by the listener, the organization named in every row.
inline const Statement kCancelledHolders{
    "aclaim_cancelled_holders",
    R"SQL(
SELECT n.i
  FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[])
       WITH ORDINALITY AS n(org_id, job_id, generation, worker, i)
  JOIN jobs j ON j.id = n.job_id AND j.org_id = n.org_id
 WHERE j.state = 'cancelled' AND j.generation = n.generation AND j.assignee = n.worker
)SQL",
    {"orgs bigint[]", "jobs bigint[]", "generations bigint[]", "workers text[]"}};

// Retention (schema/baseline/tables.sql): one coordinator at a time prunes finished jobs and keeps
// job_events' partitions ahead of the clock.

/// The session advisory lock that makes one coordinator the pruner while the others pass. Taken
/// with a try, never waited for; its key is apart from every lock a claim takes (kClaimLocks).
inline const Statement kRetentionTryLock{
    "aclaim_retention_try_lock",
    "SELECT pg_try_advisory_lock(hashtextextended('aclaim retention', 0)) AS held",
    {}};
inline const Statement kRetentionUnlock{
    "aclaim_retention_unlock",
    "SELECT pg_advisory_unlock(hashtextextended('aclaim retention', 0)) AS released",
    {}};

/// $1 now, $2 batch. One prune batch through aclaim_prune_jobs, whose predicate
/// aclaim_job_prunable decides what may go: one row per organization touched, with how many jobs
/// of each state and how many results were removed (and recorded in job_prunes).
inline const Statement kPruneJobs{"aclaim_prune_jobs",
                                  R"SQL(
SELECT org_id, completed, failed, discarded, cancelled, results
  FROM aclaim_prune_jobs($1::bigint, $2::int)
)SQL",
                                  {"now_us bigint", "batch int"}};

/// $1 now, $2 months ahead. Creates the monthly partitions of job_events that do not exist yet,
/// from the month of now through the months ahead; returns the names created.
inline const Statement kEnsurePartitions{
    "aclaim_ensure_partitions",
    "SELECT p AS name FROM aclaim_ensure_event_partitions($1::bigint, $2::int) AS p",
    {"now_us bigint", "months_ahead int"}};

/// The partitions of job_events by state, and the end of the last attached one: how far ahead
/// events have somewhere to go.
inline const Statement kPartitionSummary{"aclaim_partition_summary",
                                         R"SQL(
SELECT count(*) FILTER (WHERE state = 'attached') AS attached,
       count(*) FILTER (WHERE state = 'detaching') AS detaching,
       count(*) FILTER (WHERE state = 'archived') AS archived,
       count(*) FILTER (WHERE state = 'dropped') AS dropped,
       aclaim_us(max(to_at) FILTER (WHERE state = 'attached')) AS covered_until_us
  FROM job_event_partitions
)SQL",
                                         {}};

/// Every statement a store prepares at connect, in one table. The claim statements are not here:
/// a store prepares a claim plan's statement (claim_plan.hpp) the first time it needs it.
inline const std::vector<const Statement*> kStatements = {&kScope,
                                                          &kEnqueue,
                                                          &kClaimLocks,
                                                          &kClaimLocksExpecting,
                                                          &kRateRefill,
                                                          &kRenew,
                                                          &kProgress,
                                                          &kComplete,
                                                          &kFail,
                                                          &kRelease,
                                                          &kReclaim,
                                                          &kPromoteDue,
                                                          &kNextDue,
                                                          &kAuthority,
                                                          &kAuthorityShared,
                                                          &kRejectedBatch,
                                                          &kRenewBatch,
                                                          &kCompleteBatch,
                                                          &kRetentionTryLock,
                                                          &kRetentionUnlock,
                                                          &kPruneJobs,
                                                          &kEnsurePartitions,
                                                          &kPartitionSummary,
                                                          &kEnqueueExcluding};

}  // namespace aclaim::store::sql
