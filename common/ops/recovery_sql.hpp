#pragma once

// Every statement of the recovery tool and the quarantine commands, in one place. Like the store's
// statements they take time as $n microseconds and never call now().
//
// The three readers are templates: {FILTER} becomes one of the k*Filter clauses below and {LOCK}
// either nothing or "FOR UPDATE", so the bulk report, the per-organization report and the
// re-read of one locked row are the same text and cannot drift apart.

#include <string>
#include <string_view>

#include "common/ops/job_record_sql.hpp"
#include "common/store/event_kinds.hpp"
#include "common/store/store_sql.hpp"

namespace aclaim::ops::sql {

using store::sql::Statement;

/// Filters for the readers. The organization filter keeps a job's events and result even when
/// they carry another organization, since that is exactly what the report must see, plus the
/// orphans (no job row) that name the organization.
inline constexpr const char* kJobsAll = "";
inline constexpr const char* kJobsOfOrg = "WHERE org_id = $1::bigint";
inline constexpr const char* kJobsOne = "WHERE id = $1::bigint";
inline constexpr const char* kJobsQuarantined = "WHERE state = 'quarantined'";
inline constexpr const char* kLinkedAll = "";
inline constexpr const char* kLinkedOfOrg =
    "WHERE job_id IN (SELECT id FROM jobs WHERE org_id = $1::bigint)"
    " OR (org_id = $1::bigint AND job_id NOT IN (SELECT id FROM jobs))";
inline constexpr const char* kLinkedOne = "WHERE job_id = $1::bigint";

/// What {LOCK} of kReadJobs becomes: the rows read locked, or not.
inline constexpr const char* kLockRead = "FOR UPDATE";
inline constexpr const char* kNoLock = "";

/// The durable fields of jobs rows (JobRecord, without payloads), in id order.
inline const std::string kReadJobs =
    std::string("SELECT ") + kJobColumns + " FROM jobs {FILTER} ORDER BY id {LOCK}";

/// The published results.
inline const std::string kReadResults =
    std::string("SELECT ") + kResultColumns + " FROM job_results {FILTER} ORDER BY job_id";

/// The rate-limit buckets of the queues that have a rate (schema/baseline/tables.sql).
inline constexpr const char* kReadRateBuckets =
    "SELECT org_id, queue, rate_per_s::float8 AS rate, rate_burst, rate_tokens::float8 AS tokens,"
    " rate_refilled_us FROM job_queues WHERE rate_per_s IS NOT NULL {FILTER} ORDER BY org_id, "
    "queue";
inline constexpr const char* kRateBucketsAll = "";
inline constexpr const char* kRateBucketsOfOrg = "AND org_id = $1::bigint";

/// Who wrote each job's saved progress (job_progress, schema/baseline/tables.sql): the generation
/// and organization, not the report itself.
inline constexpr const char* kReadProgress =
    "SELECT job_id, org_id, generation FROM job_progress {FILTER} ORDER BY job_id";

/// One summary row per job of the audit log (see EventSummary). The latest operator resolution
/// ('unquarantined') is found per job first; completions and organizations are then counted only
/// after it. The four quoted events are fetched by id in the same statement.
inline constexpr const char* kReadEventSummaries = R"SQL(
WITH ev AS (
    SELECT id, job_id, org_id, generation, kind,
           coalesce(max(id) FILTER (WHERE kind = 'unquarantined')
                    OVER (PARTITION BY job_id), 0) AS resolved_id
      FROM job_events {FILTER}
), agg AS (
    SELECT job_id,
           count(*) AS total,
           coalesce(max(generation) FILTER (WHERE kind <> 'rejected'), 0) AS max_generation,
           (array_agg(id ORDER BY generation DESC, id DESC)
                FILTER (WHERE kind <> 'rejected'))[1] AS top_id,
           (array_agg(id ORDER BY generation DESC, id DESC)
                FILTER (WHERE kind = 'claimed'))[1] AS claim_id,
           nullif(max(resolved_id), 0) AS resolution_id,
           count(*) FILTER (WHERE kind = 'completed' AND id > resolved_id) AS completions,
           coalesce(string_agg(generation::text, ',' ORDER BY id)
                        FILTER (WHERE kind = 'completed' AND id > resolved_id), '') AS completed_at_gens,
           max(id) FILTER (WHERE kind = 'completed' AND id > resolved_id) AS completion_id,
           coalesce(string_agg(DISTINCT org_id::text, ',')
                        FILTER (WHERE id > resolved_id), '') AS orgs
      FROM ev GROUP BY job_id
)
SELECT a.job_id, a.total, a.max_generation, a.completions, a.completed_at_gens, a.orgs,
       t.id AS top_id, t.org_id AS top_org_id, t.generation AS top_generation, t.kind AS top_kind,
       coalesce(t.worker, '') AS top_worker, aclaim_us(t.at) AS top_at_us, t.detail AS top_detail,
       c.id AS claim_id, c.org_id AS claim_org_id, c.generation AS claim_generation,
       c.kind AS claim_kind, coalesce(c.worker, '') AS claim_worker,
       aclaim_us(c.at) AS claim_at_us, c.detail AS claim_detail,
       r.id AS resolution_id, r.org_id AS resolution_org_id,
       r.generation AS resolution_generation, r.kind AS resolution_kind,
       coalesce(r.worker, '') AS resolution_worker, aclaim_us(r.at) AS resolution_at_us,
       r.detail AS resolution_detail,
       d.id AS completion_id, d.org_id AS completion_org_id,
       d.generation AS completion_generation, d.kind AS completion_kind,
       coalesce(d.worker, '') AS completion_worker, aclaim_us(d.at) AS completion_at_us,
       d.detail AS completion_detail
  FROM agg a
  LEFT JOIN job_events t ON t.id = a.top_id
  LEFT JOIN job_events c ON c.id = a.claim_id
  LEFT JOIN job_events r ON r.id = a.resolution_id
  LEFT JOIN job_events d ON d.id = a.completion_id
 ORDER BY a.job_id
)SQL";

/// $1 job. Every event of one job, for `quarantine show`.
inline constexpr const char* kReadEventsOfJob = R"SQL(
SELECT id, org_id, generation, kind, coalesce(worker, '') AS worker, aclaim_us(at) AS at_us, detail
  FROM job_events WHERE job_id = $1::bigint ORDER BY id
)SQL";

/// $1 now, $2 job, $3 detail. The reaper's reclaim (store_sql.hpp) narrowed to one job that the
/// caller has locked.
inline const Statement kReclaimOne{"aclaim_reclaim_one",
                                   store::sql::reclaim_statement(R"SQL(SELECT id, assignee FROM jobs
     WHERE id = $2::bigint AND state = 'assigned' AND lease_expires_at <= aclaim_ts($1::bigint)
     FOR UPDATE)SQL",
                                                                 "$3::text"),
                                   {"now_us bigint", "job bigint", "detail text"}};

/// The CTE `logged` that audits an operator's transition of each row of the CTE `from` (which
/// returns id, org_id, generation) as `kind`: $3 operator, $4 now, $5 detail, as every operator
/// statement here and in operator_sql.hpp takes them.
inline std::string operator_logged(store::EventKind kind, std::string_view from) {
    return "logged AS (\n    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, "
           "detail)\n    SELECT id, org_id, generation, '" +
           std::string(store::kEventKinds(kind)) +
           "', $3::text, aclaim_ts($4::bigint), $5::text FROM " + std::string(from) + "\n)";
}

/// $1 job, $2 reason, $3 operator, $4 now, $5 evidence. Only state and the two quarantine columns
/// change; quarantined_from keeps the state the row had (SET reads the old row).
inline const Statement kQuarantine{
    "aclaim_quarantine",
    R"SQL(
WITH q AS (
    UPDATE jobs SET state = 'quarantined', quarantined_from = state, quarantine_reason = $2::text
     WHERE id = $1::bigint AND state <> 'quarantined'
    RETURNING id, org_id, generation, quarantined_from
), )SQL" +
        operator_logged(store::EventKind::Quarantined, "q") + R"SQL(
SELECT quarantined_from FROM q
)SQL",
    {"job bigint", "reason text", "operator text", "now_us bigint", "evidence text"}};

/// $1 job, $2 generation, $3 operator, $4 now, $5 detail. Back to pending (to waiting while a
/// dependency of it has not ended, schema/baseline/tables.sql: a release never runs a job before
/// them) with the lease fields cleared as the pending CHECK requires; the generation is raised to
/// the highest the job ever saw so that the next claim outranks every earlier holder.
inline const Statement kReleaseQuarantined{
    "aclaim_release_quarantined",
    R"SQL(
WITH u AS (
    UPDATE jobs
       SET state = coalesce((SELECT 'waiting' FROM job_dependencies d
                              WHERE d.job_id = jobs.id AND d.resolved IS NULL LIMIT 1),
                            'pending'),
           generation = $2::bigint, assignee = NULL, claimed_at = NULL,
           lease_expires_at = NULL, completed_at = NULL, result_ref = NULL,
           quarantined_from = NULL, quarantine_reason = NULL
     WHERE id = $1::bigint AND state = 'quarantined' AND generation <= $2::bigint
    RETURNING id, org_id, generation, state
), )SQL" +
        operator_logged(store::EventKind::Unquarantined, "u") + R"SQL(
SELECT id, state, aclaim_wake(org_id) FROM u
)SQL",
    {"job bigint", "generation bigint", "operator text", "now_us bigint", "detail text"}};

/// $1 job, $2 generation, $3 operator, $4 now, $5 detail, $6 last_error. Final failure by
/// decision of an operator: the failed CHECK wants completed_at set and no result_ref or lease.
inline const Statement kFailQuarantined{"aclaim_fail_quarantined",
                                        R"SQL(
WITH u AS (
    UPDATE jobs j
       SET state = 'failed', generation = $2::bigint, completed_at = aclaim_ts($4::bigint),
           lease_expires_at = NULL, result_ref = NULL, last_error = $6::text,
           quarantined_from = NULL, quarantine_reason = NULL
     WHERE id = $1::bigint AND state = 'quarantined' AND generation <= $2::bigint
    RETURNING )SQL" + store::sql::outcome_settled("u", "$4::bigint") +
                                            operator_logged(store::EventKind::Unquarantined, "u") +
                                            R"SQL(
SELECT id, )SQL" + store::sql::kSettledColumn +
                                            R"SQL( FROM u
)SQL",
                                        {"job bigint", "generation bigint", "operator text",
                                         "now_us bigint", "detail text", "last_error text"}};

/// The statements above that take parameters, run unprepared on the caller's connection (their
/// names only identify them); listed for the test that holds each text to its contract.
inline const std::vector<const Statement*> kRecoveryStatements = {
    &kReclaimOne, &kQuarantine, &kReleaseQuarantined, &kFailQuarantined};

}  // namespace aclaim::ops::sql
