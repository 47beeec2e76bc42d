#pragma once

// The statements of the workflow view (the console's and `aclaimctl workflow show`): a job's
// workflow is every job connected to it by dependencies (schema/baseline/tables.sql), in
// either direction, within its organization. Bounded: a walk stops at a given number of jobs.

namespace aclaim::ops::sql {

/// $1 job, $2 organization or 0 for any, $3 at most this many jobs. The job's organization,
/// then the ids of its workflow, the job itself first, in the order the walk reached them: each
/// step one probe of job_dependencies' primary key (what a job waits for) and one of
/// job_dependencies_dependents (what waits for it, schema/baseline/tables.sql). UNION keeps a job
/// seen once, so the walk ends; the LIMIT stops it early on a large graph (a recursive query runs
/// only as far as its reader reads). No row: the job does not exist, or not in organization $2.
inline constexpr const char* kWorkflowJobs = R"SQL(
WITH RECURSIVE root AS (
    SELECT id, org_id FROM jobs
     WHERE id = $1::bigint AND ($2::bigint = 0 OR org_id = $2::bigint)
), reach(id) AS (
    SELECT id FROM root
    UNION
    SELECT n.id
      FROM reach r CROSS JOIN root o,
           LATERAL (SELECT d.depends_on AS id FROM job_dependencies d
                     WHERE d.job_id = r.id AND d.org_id = o.org_id
                    UNION ALL
                    SELECT d.job_id FROM job_dependencies d
                     WHERE d.depends_on = r.id AND d.org_id = o.org_id) AS n
)
SELECT (SELECT org_id FROM root) AS org_id, r.id FROM reach r LIMIT $3::int
)SQL";

/// $1 organization, $2 bigint[] jobs. Each job's stage: its state, who holds or completed it,
/// its attempts and last error. A job in $2 without a row was pruned by retention.
inline constexpr const char* kWorkflowStages = R"SQL(
SELECT id, queue, state, generation, attempts, max_attempts, assignee, last_error,
       aclaim_us(enqueued_at) AS enqueued_us, aclaim_us(completed_at) AS completed_us
  FROM jobs
 WHERE org_id = $1::bigint AND id = ANY($2::bigint[])
 ORDER BY id
)SQL";

/// $1 organization, $2 bigint[] jobs. The edges among them, with each edge's policy and how its
/// dependency ended (resolved NULL: not yet).
inline constexpr const char* kWorkflowEdges = R"SQL(
SELECT job_id, depends_on, policy, resolved, aclaim_us(resolved_at) AS resolved_us
  FROM job_dependencies
 WHERE org_id = $1::bigint AND job_id = ANY($2::bigint[]) AND depends_on = ANY($2::bigint[])
 ORDER BY job_id, depends_on
)SQL";

}  // namespace aclaim::ops::sql
