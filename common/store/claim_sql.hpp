#pragma once

// The statements of a claim transaction around the claim itself (claim_plan.hpp): the locks
// that come first and say which plan the served queues need, and the refill read after a claim
// that a rate limit held back.

#include "common/store/statement.hpp"

namespace aclaim::store::sql {

/// $1 org, $2 text[] queues. The first statement of every claim transaction; the claim itself
/// runs in the next statement, whose snapshot is taken after these locks are granted. It takes
/// the organization's queue lock shared (pausing a queue or changing its limit takes it
/// exclusive, so a claim sees a pause that committed before it and a pause waits for the claims
/// already running), and the lock of each served queue that has a concurrency limit exclusive,
/// in name order: claims on a limited queue take turns, and each counts the leases out after the
/// previous one committed, so no number of coordinators can exceed the limit together. A queue
/// with a rate limit (schema/baseline/tables.sql) is locked the same way, so that each
/// claim reads its bucket after the previous one spent from it. `rated` counts those queues: a
/// claim's plan has the rate dimension, and a claim that came back short asks when their buckets
/// refill, only when there are some. A weighted
/// queue (schema/baseline/tables.sql) is locked the same way, so that each claim reads the
/// passes the previous one wrote; `weighted` counts those queues, and a claim's plan has the
/// weight dimension only when there are some. `excluding` counts the served queues that ever
/// received a job with exclusions (schema/baseline/tables.sql), and the claim's plan has the
/// exclusion dimension only when there are some, or when `exclusions_epoch` moved since this
/// connection's previous claim. The epoch closes the gap between this statement's snapshot
/// and its lock: it is read last, after the organization's lock is granted (the target list is
/// evaluated in order), and the enqueue that first flags a queue advances it while holding that
/// lock exclusive, until it commits. So a flag that committed after this snapshot was either
/// committed before the lock was granted, and its epoch step is seen here, or commits after this
/// claim's transaction; and a flag that committed before the previous claim's lock was granted is
/// in this snapshot, since this claim began after that one committed. `capped` counts the served
/// queues with a concurrency limit: a claim that came back short may be waiting for one of their
/// slots, and the coordinator looks again when one frees (ClaimOutcome::slot_bound).
inline const Statement kClaimLocks{"aclaim_claim_locks",
                                   R"SQL(
SELECT pg_advisory_xact_lock_shared(aclaim_org_lock($1::bigint)),
       (SELECT count(pg_advisory_xact_lock(aclaim_queue_lock($1::bigint, queue)))
          FROM (SELECT queue FROM job_queues
                 WHERE org_id = $1::bigint AND queue = ANY($2::text[])
                   AND (max_assigned IS NOT NULL OR rate_per_s IS NOT NULL
                        OR weight IS NOT NULL)
                 ORDER BY queue) AS limited) AS limited,
       c.rated, c.weighted, c.excluding, c.capped,
       coalesce(pg_sequence_last_value('aclaim_exclusions_epoch'::regclass), 0)
           AS exclusions_epoch
  FROM (SELECT count(*) FILTER (WHERE rate_per_s IS NOT NULL) AS rated,
               count(*) FILTER (WHERE weight IS NOT NULL) AS weighted,
               count(*) FILTER (WHERE has_exclusions) AS excluding,
               count(*) FILTER (WHERE max_assigned IS NOT NULL) AS capped
          FROM job_queues
         WHERE org_id = $1::bigint AND queue = ANY($2::text[])) AS c
)SQL",
                                   {"org bigint", "queues text[]"}};

/// $1 org, $2 text[] queues, $3 the dimension bits of the claim plan the sender expects
/// (ClaimPlan::dimension_bits), $4 the exclusions epoch of this connection's previous claim (0
/// before its first: the epoch has moved if any queue was ever flagged). kClaimLocks, for a
/// transaction sent with its COMMIT in one message (AssignmentStore's
/// complete_and_claim_sent_together): the same locks and row, and the plan's dimensions they call
/// for, computed as the store's plan_of computes them, passed through
/// aclaim_expect_claim_variant (schema/definitions/functions/aclaim_expect_claim_variant.sql),
/// which raises SQLSTATE ACV01 when it is not $3, before the claim that follows can run.
inline const Statement kClaimLocksExpecting{"aclaim_claim_locks_expecting",
                                            R"SQL(
SELECT l.*,
       aclaim_expect_claim_variant(
           (CASE WHEN l.rated > 0 THEN 1 ELSE 0 END)
           | (CASE WHEN l.weighted > 0 THEN 2 ELSE 0 END)
           | (CASE WHEN l.excluding > 0 OR l.exclusions_epoch <> $4::bigint
                   THEN 4 ELSE 0 END),
           $3::int) AS variant
  FROM ()SQL" + kClaimLocks.text + R"SQL( OFFSET 0) AS l
)SQL",
                                            {"org bigint", "queues text[]", "expected int",
                                             "known_epoch bigint"}};

/// What a claim returns of a job's saved progress (schema/baseline/tables.sql): the columns, and
/// the join that finds them for the claimed rows `c` (NULLs for a job nobody reported progress on).
/// A plain LEFT JOIN, which the planner makes a hash join over an empty or small table and one
/// primary-key probe per claimed job over a large one. Measured on a 64-job coalesced claim
/// (generic plans, 20,000 pending jobs; docs/performance.md, "Progress and the claim"): with no
/// progress saved the claim costs what it did (1.099 against 1.098 ms); with 1,000 rows (a hash
/// join) +0.10 to +0.12 ms, with 100,000 (the probes) +0.03 ms. A lateral subquery, which forces
/// the probes, cost +0.05 ms even with the table empty.
inline constexpr const char* kResumeColumns =
    "p.generation AS resume_generation, p.percent AS resume_percent, p.note AS resume_note, "
    "p.checkpoint AS resume_checkpoint";
inline constexpr const char* kResumeJoin = "LEFT JOIN job_progress p ON p.job_id = c.id";

/// $1 org, $2 text[] queues served, $3 now. After a claim that came back short, in its
/// transaction, and only when kClaimLocks found a served queue with a rate limit: the first
/// instant at which a served, unpaused, rate-limited queue that holds a pending job and whose
/// bucket is empty has a whole token again (NULL: none is held back by its rate). Each queue's
/// pending jobs are probed in jobs_org_state, one entry each.
inline const Statement kRateRefill{"aclaim_rate_refill",
                                   R"SQL(
SELECT min(aclaim_rate_refill_us(q.rate_per_s, q.rate_burst, q.rate_tokens, q.rate_refilled_us,
                                 $3::bigint)) AS refill_us
  FROM job_queues q
 WHERE q.org_id = $1::bigint AND q.queue = ANY($2::text[]) AND q.rate_per_s IS NOT NULL
   AND NOT q.paused
   AND aclaim_rate_tokens(q.rate_per_s, q.rate_burst, q.rate_tokens, q.rate_refilled_us,
                          $3::bigint) < 1
   AND EXISTS (SELECT 1 FROM jobs j
                WHERE j.org_id = q.org_id AND j.state = 'pending' AND j.queue = q.queue)
)SQL",
                                   {"org bigint", "queues text[]", "now_us bigint"}};

}  // namespace aclaim::store::sql
