#pragma once

// The console's own reads: the overview and the live leases. Each is bounded on a big table (see
// schema/baseline/tables.sql for the indexes they use): no statement here reads every row of jobs
// or job_events. Jobs, a job's dossier and the quarantine inbox are the operator store's and the
// recovery store's statements, shared with aclaimctl. Time comes in as $n microseconds, as in the
// store.

#include <string>

namespace aclaim::console::sql {

/// Above this many rows of one (organization, state) the overview shows the planner's estimate
/// instead of counting: an index-only count of at most this many entries per pair stays cheap.
inline constexpr long long kExactCountCap = 2000;

/// Every organization with jobs: a skip scan, one probe of each organization-led index per
/// organization (aclaim_next_org, schema/definitions/functions/aclaim_next_org.sql).
inline constexpr const char* kOrganizations = R"SQL(
WITH RECURSIVE o AS (
    SELECT aclaim_next_org(NULL) AS org_id
    UNION ALL
    SELECT aclaim_next_org(o.org_id) FROM o WHERE o.org_id IS NOT NULL
)
SELECT org_id FROM o WHERE org_id IS NOT NULL ORDER BY org_id
)SQL";

/// $1 bigint[] organizations, $2 text[] states (pairwise), $3 cap. Per pair, the count of rows up
/// to $3 + 1 (index-only scans of the index that holds the state, aclaim_count_in,
/// schema/definitions/functions/aclaim_count_in.sql; more than $3 means "take the estimate").
inline constexpr const char* kCappedCounts = R"SQL(
SELECT o AS org_id, s AS state, aclaim_count_in(o, s, NULL, $3::bigint) AS n
  FROM unnest($1::bigint[], $2::text[]) AS p(o, s)
)SQL";

/// The finished states' counts only grow (store::kFinishedStates), so an estimate from the last
/// ANALYZE errs low, never showing work that is gone. Above kSkipCountFactor times the cap by the
/// estimate, the overview does not count them at all.
inline constexpr long long kSkipCountFactor = 4;

/// The planner's per-(organization, state) estimates in one read: the most common combinations
/// of the jobs_org_state_mcv statistics (schema/baseline/tables.sql) times the table's estimated
/// rows. Readable by the table's owner (the login role that migrated), empty before the first
/// ANALYZE.
inline constexpr const char* kStateEstimates = R"SQL(
SELECT s.most_common_vals[i][1]::bigint AS org_id, s.most_common_vals[i][2] AS state,
       round(s.most_common_freqs[i] * greatest(c.reltuples, 0))::bigint AS estimate
  FROM pg_stats_ext s, generate_subscripts(s.most_common_freqs, 1) i, pg_class c
 WHERE s.statistics_name = 'jobs_org_state_mcv' AND s.schemaname = current_schema()
   AND c.oid = 'jobs'::regclass
)SQL";

/// $1 now. Leases out and expired ones not yet reclaimed, per organization: assigned rows only
/// (jobs_assigned_queue), which the number of workers bounds.
inline constexpr const char* kLeaseCounts = R"SQL(
SELECT org_id,
       count(*) FILTER (WHERE lease_expires_at > aclaim_ts($1::bigint)) AS leases_out,
       count(*) FILTER (WHERE lease_expires_at <= aclaim_ts($1::bigint)) AS leases_expired
  FROM jobs
 WHERE state = 'assigned'
 GROUP BY org_id
)SQL";

/// The queue table (ops::count_queues, of store::kQueueStates) lists at most this many queues
/// per organization and state.
inline constexpr int kQueuesShown = 100;

/// $1 since, $2 now, $3 bigint[] organizations. Completions per organization and minute since $1:
/// a skip scan over each organization's queues with completed jobs, then one range of
/// jobs_finished (org_id, queue, state, completed_at) per queue, binned in the index's own type:
/// converting every row to microseconds first would cost more than the scan.
inline constexpr const char* kCompletionsPerMinute = R"SQL(
WITH RECURSIVE q AS (
    SELECT o, aclaim_next_queue(o, 'completed', NULL) AS queue FROM unnest($3::bigint[]) AS o
    UNION ALL
    SELECT q.o, aclaim_next_queue(q.o, 'completed', q.queue) FROM q WHERE q.queue IS NOT NULL
)
SELECT q.o AS org_id, b.bin_us, sum(b.n)::bigint AS n
  FROM q,
       LATERAL (SELECT aclaim_us(date_bin('1 minute', j.completed_at, aclaim_ts($1::bigint))) AS bin_us,
                       count(*) AS n
                  FROM jobs j
                 WHERE j.org_id = q.o AND j.queue = q.queue AND j.state = 'completed'
                   AND j.completed_at > aclaim_ts($1::bigint)
                   AND j.completed_at <= aclaim_ts($2::bigint)
                 GROUP BY 1) b
 GROUP BY 1, 2
)SQL";

/// $1 since. Rejections per organization and reason since $1 (job_events_rejected). The reason
/// is the detail's prefix, as the store writes it ("stale_generation: ...").
inline constexpr const char* kRejections = R"SQL(
SELECT org_id, split_part(detail, ':', 1) AS reason, count(*) AS n
  FROM job_events
 WHERE kind = 'rejected' AND at > aclaim_ts($1::bigint)
 GROUP BY 1, 2 ORDER BY 1, 3 DESC
)SQL";

/// $1 limit. Every held lease, soonest to expire first (read from jobs_assigned_queue and sorted),
/// with the latest claim or renewal from the job's own events (job_events_job).
inline constexpr const char* kLeases = R"SQL(
SELECT id, org_id, generation, assignee, attempts, max_attempts,
       aclaim_us(claimed_at) AS claimed_us, aclaim_us(lease_expires_at) AS lease_us,
       (SELECT aclaim_us(max(e.at)) FROM job_events e
         WHERE e.job_id = jobs.id AND e.kind IN ('claimed', 'renewed')) AS renewed_us
  FROM jobs
 WHERE state = 'assigned'
 ORDER BY lease_expires_at, id
 LIMIT $1::int
)SQL";

/// $1 now, $2 bigint[] organizations. The workers connected to each coordinator that has written
/// its presence within three of its intervals (coordinator_presence, schema/baseline/tables.sql).
inline constexpr const char* kConnectedWorkers = R"SQL(
SELECT org_id, coordinator, endpoint, workers, aclaim_us(seen_at) AS seen_us
  FROM coordinator_presence
 WHERE org_id = ANY($2::bigint[])
   AND seen_at > aclaim_ts($1::bigint - 3 * interval_ms * 1000::bigint)
 ORDER BY org_id, coordinator
)SQL";

/// $1 job, $2 now. The reviewers connected to a live coordinator of the job's organization
/// (coordinator_presence.reviewers, as kConnectedWorkers takes a row as live) that serve the job's
/// queue (coordinator_presence.serving, schema/baseline/tables.sql), each with whether the job
/// excludes them (aclaim_excluded), then one row without a name whose `unknown` counts the live
/// rows that name nobody (more workers than their publisher names, or an older coordinator). A row
/// that names its reviewers without their queues (serving NULL: a coordinator that predates 0032)
/// counts each of them for every queue, as the console did before it could tell.
inline constexpr const char* kConnectedReviewers = R"SQL(
WITH live AS (
    SELECT p.reviewers, p.serving, j.queue
      FROM coordinator_presence p JOIN jobs j ON j.org_id = p.org_id
     WHERE j.id = $1::bigint
       AND p.seen_at > aclaim_ts($2::bigint - 3 * p.interval_ms * 1000::bigint)
)
SELECT r.name, aclaim_excluded($1::bigint, r.name) AS excluded, 0::bigint AS unknown
  FROM (SELECT DISTINCT name FROM live, unnest(live.reviewers) AS name
         WHERE live.serving IS NULL OR live.serving -> name @> to_jsonb(live.queue)) AS r
UNION ALL
SELECT NULL, NULL, count(*) FROM live WHERE reviewers IS NULL
 ORDER BY 1 NULLS LAST
)SQL";

/// The planner's estimate of the table's rows (-1 before the first ANALYZE).
inline constexpr const char* kTableEstimate =
    "SELECT reltuples::bigint FROM pg_class WHERE oid = 'jobs'::regclass";

/// The console's session settings. Its reads are index probes whose row estimates (recursive skip
/// scans) look costly to the planner: with JIT on, it spends a second compiling what then runs in
/// milliseconds.
inline constexpr const char* kSession = "SET jit = off; SET application_name = 'aclaim-console'";

/// $1 text: the organization (or kAllOrganizations) the data connection may see, session-wide.
inline constexpr const char* kSessionScope = "SELECT set_config('aclaim.org_id', $1, false)";

/// The planner's plan, as JSON, for counting one organization's jobs in one state: its "Plan
/// Rows" is the estimate. EXPLAIN takes no parameters, so the values are written into the text;
/// `quoted_state` must come quoted by the connection.
inline std::string state_count_plan(long long org, const std::string& quoted_state) {
    return "EXPLAIN (FORMAT JSON) SELECT 1 FROM jobs WHERE org_id = " + std::to_string(org) +
           " AND state = " + quoted_state;
}

/// $1 name, $2 password hash, $3 organizations as a bigint[] literal or NULL for all. Creates the
/// operator, or replaces its password and organizations and enables it again.
inline constexpr const char* kPutOperator = R"SQL(
INSERT INTO console_operators (name, password_hash, org_ids) VALUES ($1, $2, $3)
    ON CONFLICT (name) DO UPDATE SET password_hash = EXCLUDED.password_hash,
                                     org_ids = EXCLUDED.org_ids, disabled_at = NULL
)SQL";

/// $1 name. An enabled operator's password hash and organizations (NULL: all).
/// Which of these jobs the data connection's scope may read: row-level security does the
/// filtering (the drills page shows a scoped operator only the check's violations on its jobs).
inline constexpr const char* kVisibleJobs = R"SQL(
SELECT id FROM jobs WHERE id = ANY($1::bigint[])
)SQL";

inline constexpr const char* kOperatorLogin = R"SQL(
SELECT password_hash, array_to_string(org_ids, ',') AS orgs FROM console_operators
 WHERE name = $1 AND disabled_at IS NULL
)SQL";

/// $1 name. Ends every session of the operator (a reset password or scope signs it out
/// everywhere).
inline constexpr const char* kEndOperatorSessions = R"SQL(
DELETE FROM console_sessions WHERE operator = $1
)SQL";

/// $1 name. Removes the operator; its sessions go with it (schema/baseline/tables.sql's foreign
/// key).
inline constexpr const char* kRemoveOperator = R"SQL(
DELETE FROM console_operators WHERE name = $1
)SQL";

/// $1 token hash, $2 operator, $3 CSRF token, $4 now, $5 idle time (microseconds).
inline constexpr const char* kOpenSession = R"SQL(
INSERT INTO console_sessions (token_hash, operator, csrf, created_at, expires_at)
VALUES ($1, $2, $3, aclaim_ts($4::bigint), aclaim_ts($4::bigint + $5::bigint))
)SQL";

/// $1 now, $2 how many at most. Removes expired sessions, oldest first, a bounded batch per
/// sign-in (console_sessions_expires_at), so that the table holds what is live and little more.
inline constexpr const char* kPruneSessions = R"SQL(
DELETE FROM console_sessions
 WHERE token_hash IN (SELECT token_hash FROM console_sessions
                       WHERE expires_at <= aclaim_ts($1::bigint)
                       ORDER BY expires_at LIMIT $2::int)
)SQL";

/// $1 token hash, $2 now, $3 idle time, $4 touch step (microseconds). The live session of an
/// enabled operator, with the account's organizations as they are now; its idle deadline is
/// pushed to now + idle, but written only once it has fallen $4 behind, so that a page's
/// requests do not each write a row version.
inline constexpr const char* kFindSession = R"SQL(
WITH live AS (
    SELECT s.token_hash, s.csrf, s.expires_at, o.name,
           array_to_string(o.org_ids, ',') AS orgs
      FROM console_sessions s
      JOIN console_operators o ON o.name = s.operator AND o.disabled_at IS NULL
     WHERE s.token_hash = $1 AND s.expires_at > aclaim_ts($2::bigint)
), touched AS (
    UPDATE console_sessions s SET expires_at = aclaim_ts($2::bigint + $3::bigint)
      FROM live
     WHERE s.token_hash = live.token_hash
       AND live.expires_at < aclaim_ts($2::bigint + $3::bigint - $4::bigint)
)
SELECT name, orgs, csrf FROM live
)SQL";

/// $1 token hash. Signs the session out (in every console at once).
inline constexpr const char* kCloseSession = R"SQL(
DELETE FROM console_sessions WHERE token_hash = $1
)SQL";

}  // namespace aclaim::console::sql
