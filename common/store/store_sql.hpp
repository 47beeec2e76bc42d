#pragma once

// Every statement of the assignment contract, in one place. Time arrives as $n microseconds since
// the epoch and is converted by aclaim_ts(); nothing here calls now().

#include <string>
#include <string_view>
#include <vector>

#include "common/store/job_states.hpp"

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

/// What an UPDATE of `jobs j` that may end jobs returns for record_outcomes: the row afterwards.
inline constexpr const char* kOutcomeReturning =
    "j.id, j.org_id, j.queue, j.generation, j.attempts, j.state, j.result_ref, j.last_error, "
    "j.dedupe_key, j.completed_at, j.has_dependents";

/// The CTE body that records the outcome of each row of the CTE `from` (which returns
/// kOutcomeReturning) that ended its job: completed with its result, failed, discarded or
/// cancelled; rows that went back to a queue record nothing. Every statement that can end a job
/// includes it, so the outcome commits with the transition (schema/0008_integration.sql, and
/// docs/integration.md for how consumer groups read it); a unit test holds every statement that
/// sets a terminal state to it. Each row of an organization that has a consumer group notifies
/// aclaim_outcomes with its organization only: PostgreSQL delivers one notification per payload
/// per transaction, and a consumer treats it as "look again", never as the outcome. Organizations
/// without a group have no consumer to wake, and their transitions skip NOTIFY, whose
/// cluster-wide commit lock is held through the WAL flush and makes notifying transactions commit
/// one at a time (docs/performance.md). A group created while a transition is under way is not
/// seen by it: that one outcome reaches the group's consumer at its next bounded look.
inline std::string record_outcomes(std::string_view from) {
    std::string text = R"SQL(
    INSERT INTO job_outcomes (org_id, job_id, outcome, queue, generation, attempts, result_ref,
                              error, dedupe_key, at)
    SELECT org_id, id, state, queue, generation, attempts,
           CASE WHEN state = 'completed' THEN result_ref END,
           CASE WHEN state <> 'completed' THEN last_error END, dedupe_key, completed_at
      FROM {FROM} WHERE state IN ({FINISHED})
    RETURNING CASE WHEN EXISTS (SELECT 1 FROM result_groups g WHERE g.org_id = job_outcomes.org_id)
                   THEN pg_notify('aclaim_outcomes', org_id::text) END
)SQL";
    text.replace(text.find("{FROM}"), 6, from);
    text.replace(text.find("{FINISHED}"), 10, sql_state_list(kFinishedStates));
    return text;
}

/// The CTE body that settles the dependents (schema/0024_job_dependencies.sql) of the rows of the
/// CTE `from` (which returns kOutcomeReturning) that ended their job, {NOW} being the parameter of
/// now: one call of aclaim_dependencies_settled for the statement, in its transaction, so that
/// the accepted completion of a job's last dependency makes it claimable when it commits and a
/// refused one (no row) unblocks nothing. Only rows with has_dependents are passed; when there are
/// none the arrays are NULL and the STRICT function is not called: a job that nothing depends on
/// reads and writes nothing more (docs/performance.md). The statement's result must name the CTE
/// (settled_column) so that it runs; every statement that includes record_outcomes includes this.
inline std::string settle_dependents(std::string_view from, std::string_view now) {
    std::string text = R"SQL(
    SELECT aclaim_dependencies_settled({NOW}, array_agg(id), array_agg(state)) AS changed
      FROM {FROM} WHERE has_dependents AND state IN ({FINISHED})
)SQL";
    text.replace(text.find("{NOW}"), 5, now);
    text.replace(text.find("{FROM}"), 6, from);
    text.replace(text.find("{FINISHED}"), 10, sql_state_list(kFinishedStates));
    return text;
}

/// The result column that runs the CTE `settled` (settle_dependents): evaluated once, and only
/// when the statement returns a row.
inline constexpr const char* kSettledColumn = "(SELECT changed FROM settled) AS settled";

/// $1 org, $2 now, then one array element per job: $3 queues, $4 payloads, $5 priorities,
/// $6 run_at (NULL: now), $7 max_attempts, $8 backoff bases, $9 backoff caps, $10 run timeouts,
/// $11 dedupe keys (NULL elements: the queue's setting or the built-in default; no key), and $12
/// the dedupe window, then one element per dependency edge (NULL: none; schema/0024): $13 the
/// dependent's index in the call, $14 the dependency (a job id, or -k for job k of the call), $15
/// the policy. aclaim_enqueue_jobs (schema/0008_integration.sql, 0024) holds the statement, so
/// that the producers' SQL API enqueues exactly as the store does: it refuses a payload over
/// aclaim_max_payload_bytes(), sends each job through aclaim_enqueue_job (schema/0005), which
/// returns the existing job for a dedupe key that is still held, and takes keys in key order so
/// that producers never wait on each other in a cycle. Rows come back in the caller's order.
inline const Statement kEnqueue{
    "aclaim_enqueue",
    R"SQL(
SELECT id, created, state
  FROM aclaim_enqueue_jobs($1::bigint, $2::bigint, $3::text[], $4::text[], $5::int[],
                           $6::bigint[], $7::int[], $8::bigint[], $9::bigint[], $10::bigint[],
                           $11::text[], $12::bigint, $13::int[], $14::bigint[], $15::text[])
 ORDER BY n
)SQL",
    {"org bigint", "now_us bigint", "queues text[]", "payloads text[]", "priorities int[]",
     "run_at_us bigint[]", "max_attempts int[]", "backoff_base_us bigint[]",
     "backoff_cap_us bigint[]", "run_timeout_us bigint[]", "dedupe_keys text[]",
     "dedupe_window_us bigint", "depends_n int[]", "depends_on bigint[]", "on_failure text[]"}};

/// kEnqueue for a call of which some job has exclusions (schema/0025_job_exclusions.sql), one
/// array element each: $16 the job's index in the call, $17 the reviewer it excludes, $18 the job
/// whose completer it excludes (a job id, or -k for job k of the call); one of the two per element.
/// A separate statement, so that an enqueue without exclusions runs kEnqueue as before.
inline const Statement kEnqueueExcluding{
    "aclaim_enqueue_excluding",
    R"SQL(
SELECT id, created, state
  FROM aclaim_enqueue_jobs($1::bigint, $2::bigint, $3::text[], $4::text[], $5::int[],
                           $6::bigint[], $7::int[], $8::bigint[], $9::bigint[], $10::bigint[],
                           $11::text[], $12::bigint, $13::int[], $14::bigint[], $15::text[],
                           $16::int[], $17::text[], $18::bigint[])
 ORDER BY n
)SQL",
    {"org bigint", "now_us bigint", "queues text[]", "payloads text[]", "priorities int[]",
     "run_at_us bigint[]", "max_attempts int[]", "backoff_base_us bigint[]",
     "backoff_cap_us bigint[]", "run_timeout_us bigint[]", "dedupe_keys text[]",
     "dedupe_window_us bigint", "depends_n int[]", "depends_on bigint[]", "on_failure text[]",
     "exclude_n int[]", "exclude_keys text[]", "exclude_jobs bigint[]"}};

/// $1 org, $2 text[] queues. The first statement of every claim transaction; the claim itself
/// runs in the next statement, whose snapshot is taken after these locks are granted. It takes
/// the organization's queue lock shared (pausing a queue or changing its limit takes it
/// exclusive, so a claim sees a pause that committed before it and a pause waits for the claims
/// already running), and the lock of each served queue that has a concurrency limit exclusive,
/// in name order: claims on a limited queue take turns, and each counts the leases out after the
/// previous one committed, so no number of coordinators can exceed the limit together. A queue
/// with a rate limit (schema/0021_queue_rate_limits.sql) is locked the same way, so that each
/// claim reads its bucket after the previous one spent from it. `rated` counts those queues: a
/// claim that came back short asks when their buckets refill only when there are some. A weighted
/// queue (schema/0022_queue_weights.sql) is locked the same way, so that each claim reads the
/// passes the previous one wrote; `weighted` counts those queues, and a claim runs the weighted
/// statement (kClaimWeighted) only when there are some. `excluding` counts the served queues
/// that ever received a job with exclusions (schema/0025_job_exclusions.sql), and the claim runs
/// an exclusion-aware variant only when there are some, or when `exclusions_epoch` moved since
/// this connection's previous claim. The epoch closes the gap between this statement's snapshot
/// and its lock: it is read last, after the organization's lock is granted (the target list is
/// evaluated in order), and the enqueue that first flags a queue advances it while holding that
/// lock exclusive, until it commits. So a flag that committed after this snapshot was either
/// committed before the lock was granted, and its epoch step is seen here, or commits after this
/// claim's transaction; and a flag that committed before the previous claim's lock was granted is
/// in this snapshot, since this claim began after that one committed.
inline const Statement kClaimLocks{"aclaim_claim_locks",
                                   R"SQL(
SELECT pg_advisory_xact_lock_shared(aclaim_org_lock($1::bigint)),
       (SELECT count(pg_advisory_xact_lock(aclaim_queue_lock($1::bigint, queue)))
          FROM (SELECT queue FROM job_queues
                 WHERE org_id = $1::bigint AND queue = ANY($2::text[])
                   AND (max_assigned IS NOT NULL OR rate_per_s IS NOT NULL
                        OR weight IS NOT NULL)
                 ORDER BY queue) AS limited) AS limited,
       c.rated, c.weighted, c.excluding,
       coalesce(pg_sequence_last_value('aclaim_exclusions_epoch'::regclass), 0)
           AS exclusions_epoch
  FROM (SELECT count(*) FILTER (WHERE rate_per_s IS NOT NULL) AS rated,
               count(*) FILTER (WHERE weight IS NOT NULL) AS weighted,
               count(*) FILTER (WHERE has_exclusions) AS excluding
          FROM job_queues
         WHERE org_id = $1::bigint AND queue = ANY($2::text[])) AS c
)SQL",
                                   {"org bigint", "queues text[]"}};

/// $1 org, $2 text[] queues, $3 the claim variant's bits the sender expects, $4 the exclusions
/// epoch of this connection's previous claim (0 before its first: the epoch has moved if any queue
/// was ever flagged). kClaimLocks, for a transaction sent with its COMMIT in one message
/// (AssignmentStore::complete_and_claim_sent_together): the same locks and row, and the variant
/// they call for, computed as the store's variant_of computes it, passed through
/// aclaim_expect_claim_variant (schema/0028_claim_variant_guard.sql), which raises SQLSTATE ACV01
/// when it is not $3, before the claim that follows can run.
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

/// What a claim returns of a job's saved progress (schema/0020_progress.sql): the columns, and the
/// join that finds them for the claimed rows `c` (NULLs for a job nobody reported progress on).
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

/// The served queues that are not paused, with how many jobs each may still hand out: the
/// requested number, or what its concurrency limit leaves. $1 is the organization, {LIMIT} the
/// parameter of the number requested and {QUEUES} that of the served queues. With `rated` (the
/// statement for served queues that include a rate-limited one), also no more than the whole
/// tokens its bucket holds at {NOW} (`tokens`, NULL for a queue without a rate); without, the
/// text is the one claims ran before rate limits existed, so that they cost nothing more.
inline std::string claim_room(std::string_view limit, std::string_view queues, std::string_view now,
                              bool rated) {
    std::string text = rated ? R"SQL(room AS (
    SELECT r.queue, least(r.room, coalesce(floor(r.tokens)::int, r.room)) AS room, r.tokens
      FROM (SELECT s.queue,
                   CASE WHEN q.max_assigned IS NULL THEN {LIMIT}
                        ELSE q.max_assigned - (SELECT count(*) FROM jobs a
                                                WHERE a.org_id = $1::bigint AND a.queue = s.queue
                                                  AND a.state = 'assigned')::int END AS room,
                   aclaim_rate_tokens(q.rate_per_s, q.rate_burst, q.rate_tokens,
                                      q.rate_refilled_us, {NOW}) AS tokens
              FROM (SELECT DISTINCT unnest({QUEUES}) AS queue) AS s
              LEFT JOIN job_queues q ON q.org_id = $1::bigint AND q.queue = s.queue
             WHERE q.paused IS NOT TRUE) AS r
))SQL"
                             : R"SQL(room AS (
    SELECT s.queue,
           CASE WHEN q.max_assigned IS NULL THEN {LIMIT}
                ELSE q.max_assigned - (SELECT count(*) FROM jobs a
                                        WHERE a.org_id = $1::bigint AND a.queue = s.queue
                                          AND a.state = 'assigned')::int END AS room
      FROM (SELECT DISTINCT unnest({QUEUES}) AS queue) AS s
      LEFT JOIN job_queues q ON q.org_id = $1::bigint AND q.queue = s.queue
     WHERE q.paused IS NOT TRUE
))SQL";
    text.replace(text.find("{LIMIT}"), 7, limit);
    text.replace(text.find("{QUEUES}"), 8, queues);
    if (rated) text.replace(text.find("{NOW}"), 5, now);
    return text;
}

/// Spends, in the rated claim statement, one token of each rate-limited queue's bucket per job
/// the claim took from it (`claimed`, as counted in `room`, which never gave more than the whole
/// tokens there were); empty for the unrated one. The one-time EXISTS gate skips the update when
/// no served queue has a rate any more (a limit removed since kClaimLocks read it cannot be, as
/// that takes the organization's lock, but the statement does not rely on it). {NOW} is the
/// parameter of now.
inline std::string claim_spend(std::string_view now, bool rated) {
    if (!rated) return "";
    std::string text = R"SQL(, spent AS (
    UPDATE job_queues q
       SET rate_tokens = r.tokens - t.n,
           rate_refilled_us = greatest(coalesce(q.rate_refilled_us, {NOW}), {NOW})
      FROM room r,
           (SELECT queue, count(*) AS n FROM claimed GROUP BY queue) AS t
     WHERE EXISTS (SELECT 1 FROM room WHERE tokens IS NOT NULL)
       AND r.tokens IS NOT NULL AND t.queue = r.queue
       AND q.org_id = $1::bigint AND q.queue = r.queue
))SQL";
    text.replace(text.find("{NOW}"), 5, now);
    text.replace(text.find("{NOW}"), 5, now);
    return text;
}

/// The exclusion-aware variants' condition on a candidate job (schema/0025_job_exclusions.sql),
/// placed after the candidate scan's other conditions: the single claim's worker ($2) is not
/// excluded from it; the coalesced claim's slots ($2, one assignee each) hold one reviewer at
/// least who is not (the matching, aclaim_exclusion_slots, then places it in such a slot). Empty
/// without `excluding`, so that the statements run so far keep their text byte for byte.
inline std::string exclusion_predicate(bool excluding, bool batch) {
    if (!excluding) return "";
    return batch ? "\n       AND NOT aclaim_excluded_for_all(id, $2::text[])"
                 : "\n       AND NOT aclaim_excluded(id, $2::text)";
}

/// $1 org, $2 worker, $3 limit, $4 now, $5 lease length, $6 text[] queues served. {LOCK} is the
/// lock strategy's clause. Runs after kClaimLocks. Only pending rows are candidates (a scheduled
/// job becomes pending when its run_at arrives), from the served queues that are not paused, in
/// claim order across them; a limited queue gives no more than its room. The candidate CTE is
/// MATERIALIZED so that the locked set is computed exactly once. A locking read rechecks its
/// conditions on the newest row version, so every picked row is pending and locked; the update
/// finds it by primary key alone. (A condition on jobs.state there would make the partial index
/// jobs_claim_order a candidate for a full scan per job, see kRenewBatch.) A lease never runs past
/// the attempt's deadline. The generation is the next one, or the first of the current
/// timeline's range when that is higher (the fencing epoch, schema/0009_fencing_epoch.sql): after
/// a failover that lost commits, no claim repeats a generation granted in the lost history.
inline std::string claim_text(bool rated, bool excluding = false) {
    return "WITH " + claim_room("$3::int", "$6::text[]", "$4::bigint", rated) +
           R"SQL(, picked AS MATERIALIZED (
    SELECT id, queue, priority, run_at FROM jobs
     WHERE org_id = $1::bigint AND state = 'pending'
       AND queue IN (SELECT queue FROM room WHERE room > 0))SQL" +
           exclusion_predicate(excluding, false) + R"SQL(
     ORDER BY priority DESC, run_at, id
     LIMIT $3::int
     FOR UPDATE {LOCK}
), allowed AS (
    SELECT p.id
      FROM (SELECT id, queue,
                   row_number() OVER (PARTITION BY queue ORDER BY priority DESC, run_at, id) AS rn
              FROM picked) AS p
      JOIN room USING (queue)
     WHERE p.rn <= room.room
), claimed AS (
    UPDATE jobs j
       SET state = 'assigned', generation = greatest(j.generation + 1, (SELECT aclaim_generation_floor()) + 1),
           assignee = $2::text,
           claimed_at = aclaim_ts($4::bigint),
           deadline_at = aclaim_ts($4::bigint + j.run_timeout_us),
           lease_expires_at = least(aclaim_ts($4::bigint + $5::bigint),
                                    aclaim_ts($4::bigint + j.run_timeout_us)),
           attempts = j.attempts + 1
      FROM allowed
     WHERE j.id = allowed.id
    RETURNING j.id, j.org_id, j.queue, j.generation, j.priority,
              aclaim_us(j.enqueued_at) AS enqueued_us, aclaim_us(j.run_at) AS run_at_us,
              aclaim_us(j.lease_expires_at) AS lease_us, aclaim_us(j.deadline_at) AS deadline_us,
              j.attempts, j.max_attempts, j.payload
), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at)
    SELECT id, org_id, generation, 'claimed', $2::text, aclaim_ts($4::bigint) FROM claimed
))SQL" + claim_spend("$4::bigint", rated) +
           R"SQL(
SELECT c.id, c.org_id, c.queue, c.generation, c.priority, c.enqueued_us, c.lease_us,
       c.deadline_us, c.attempts, c.max_attempts, c.payload, )SQL" +
           std::string(kResumeColumns) + "\n  FROM claimed c " + kResumeJoin + R"SQL(
 ORDER BY c.priority DESC, c.run_at_us, c.id
)SQL";
}
inline const Statement kClaim{"aclaim_claim",
                              claim_text(false),
                              {"org bigint", "worker text", "limit int", "now_us bigint",
                               "lease_us bigint", "queues text[]"}};
/// kClaim when a served queue has a rate limit (kClaimLocks' `rated`): its room is bounded by
/// the bucket too, and it spends the tokens of the jobs it took (claim_spend).
inline const Statement kClaimRated{"aclaim_claim_rated",
                                   claim_text(true),
                                   {"org bigint", "worker text", "limit int", "now_us bigint",
                                    "lease_us bigint", "queues text[]"}};
/// kClaim and kClaimRated when a served queue ever received a job with exclusions (kClaimLocks'
/// `excluding`): a candidate the worker is excluded from is passed over (exclusion_predicate).
inline const Statement kClaimExcluding{"aclaim_claim_excluding",
                                       claim_text(false, true),
                                       {"org bigint", "worker text", "limit int", "now_us bigint",
                                        "lease_us bigint", "queues text[]"}};
inline const Statement kClaimRatedExcluding{"aclaim_claim_rated_excluding",
                                            claim_text(true, true),
                                            {"org bigint", "worker text", "limit int",
                                             "now_us bigint", "lease_us bigint", "queues text[]"}};

/// The claim on served queues of which one at least has a weight (kClaimLocks' `weighted`), one
/// text for the single claim (`batch` false: $1 org, $2 worker, $3 limit, $4 now, $5 lease
/// length, $6 queues, as kClaim) and the coalesced one (`batch`: $1 org, $2 one assignee per
/// slot, $3 now, $4 lease length, $5 queues, as kClaimBatch). Room and rate limits as in
/// kClaimRated. Each served queue is scanned on its own, in claim order (priority DESC, run_at,
/// id), for as many jobs as the claim may take from it: a weighted queue through
/// jobs_weighted_order (schema/0026_weighted_claim_index.sql), which leads with the queue and holds
/// the pending jobs of weighted queues only, so that its scan starts at the queue's first job
/// however the other queues' jobs rank. Of those, the claim takes the ones whose finish, pass +
/// k / weight for the queue's k-th, is least (stride scheduling, schema/0022_queue_weights.sql),
/// ties to the heavier queue, then the queue's name. A served queue without a weight has no finish
/// and gives jobs only when the weighted ones have none left to give, by priority among
/// themselves; so it is scanned (through jobs_claim_order, as a claim serving it alone is) only
/// when the weighted queues gave fewer than the claim takes. A queue starts from its pass, or one
/// unit behind the furthest pass served (`level`) if it is further back or has none. Each
/// weighted queue's pass moves on by what it gave, in the same statement, under the queue's lock,
/// and a rated queue's bucket is spent in the same update of its row (claim_spend's arithmetic):
/// a second update of one row in one statement would be lost. The weighted claim reads the weight
/// after the organization's lock (kClaimLocks), so a weight set and its jobs marked commit before
/// it or after it, never between.
inline std::string claim_weighted_text(bool batch, bool excluding = false) {
    const std::string limit = batch ? "cardinality($2::text[])" : "$3::int";
    const std::string now = batch ? "$3::bigint" : "$4::bigint";
    const std::string lease = batch ? "$4::bigint" : "$5::bigint";
    const std::string queues = batch ? "$5::text[]" : "$6::text[]";
    const std::string worker = batch ? "($2::text[])[a.pos]" : "$2::text";
    std::string text = R"SQL(WITH room AS (
    SELECT r.queue, least(r.room, coalesce(floor(r.tokens)::int, r.room)) AS room, r.tokens,
           r.weight, r.pass
      FROM (SELECT s.queue,
                   CASE WHEN q.max_assigned IS NULL THEN {LIMIT}
                        ELSE q.max_assigned - (SELECT count(*) FROM jobs a
                                                WHERE a.org_id = $1::bigint AND a.queue = s.queue
                                                  AND a.state = 'assigned')::int END AS room,
                   aclaim_rate_tokens(q.rate_per_s, q.rate_burst, q.rate_tokens,
                                      q.rate_refilled_us, {NOW}) AS tokens,
                   q.weight, q.weight_pass AS pass
              FROM (SELECT DISTINCT unnest({QUEUES}) AS queue) AS s
              LEFT JOIN job_queues q ON q.org_id = $1::bigint AND q.queue = s.queue
             WHERE q.paused IS NOT TRUE) AS r
), level AS (
    SELECT max(pass) - 1 AS floor FROM room WHERE weight IS NOT NULL
), weighed_picked AS MATERIALIZED (
    SELECT c.id, r.queue, c.priority, c.run_at
      FROM room r
     CROSS JOIN LATERAL (
         SELECT id, priority, run_at FROM jobs
          WHERE org_id = $1::bigint AND state = 'pending' AND weighed AND queue = r.queue{EXCLUDE}
          ORDER BY priority DESC, run_at, id
          LIMIT greatest(least(r.room, {LIMIT}), 0)
            FOR UPDATE {LOCK}) AS c
     WHERE r.room > 0 AND r.weight IS NOT NULL
), picked AS MATERIALIZED (
    SELECT id, queue, priority, run_at FROM weighed_picked
    UNION ALL
    SELECT c.id, r.queue, c.priority, c.run_at
      FROM room r
     CROSS JOIN LATERAL (
         SELECT id, priority, run_at FROM jobs
          WHERE org_id = $1::bigint AND state = 'pending' AND queue = r.queue{EXCLUDE}
          ORDER BY priority DESC, run_at, id
          LIMIT greatest(least(r.room, {LIMIT}), 0)
            FOR UPDATE {LOCK}) AS c
     WHERE r.room > 0 AND r.weight IS NULL
       AND (SELECT count(*) FROM weighed_picked) < {LIMIT}
), ranked AS (
    SELECT p.id, p.queue,
           coalesce(greatest(r.pass, l.floor), 0)
               + row_number() OVER (PARTITION BY p.queue
                                    ORDER BY p.priority DESC, p.run_at, p.id)::numeric
                 / r.weight AS finish,
           r.weight, p.priority, p.run_at
      FROM picked p JOIN room r USING (queue) CROSS JOIN level l
), allowed AS (
    SELECT id, row_number() OVER (ORDER BY finish NULLS LAST, weight DESC, queue,
                                           priority DESC, run_at, id) AS pos
      FROM ranked
     ORDER BY pos
     LIMIT {LIMIT}
){MATCHED}, claimed AS (
    UPDATE jobs j
       SET state = 'assigned', generation = greatest(j.generation + 1, (SELECT aclaim_generation_floor()) + 1),
           assignee = {WORKER},
           claimed_at = aclaim_ts({NOW}),
           deadline_at = aclaim_ts({NOW} + j.run_timeout_us),
           lease_expires_at = least(aclaim_ts({NOW} + {LEASE}),
                                    aclaim_ts({NOW} + j.run_timeout_us)),
           attempts = j.attempts + 1
      FROM {SLOTTED} a
     WHERE j.id = a.id
    RETURNING a.pos AS slot, j.id, j.org_id, j.queue, j.generation, j.priority,
              aclaim_us(j.enqueued_at) AS enqueued_us, aclaim_us(j.lease_expires_at) AS lease_us,
              aclaim_us(j.deadline_at) AS deadline_us, j.attempts, j.max_attempts, j.payload,
              j.assignee
), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at)
    SELECT id, org_id, generation, 'claimed', assignee, aclaim_ts({NOW}) FROM claimed
), weighed AS (
    UPDATE job_queues q
       SET weight_pass = CASE WHEN r.weight IS NULL THEN q.weight_pass
                              ELSE coalesce(greatest(r.pass, l.floor), 0)
                                   + t.n::numeric / r.weight END,
           rate_tokens = CASE WHEN r.tokens IS NULL THEN q.rate_tokens ELSE r.tokens - t.n END,
           rate_refilled_us = CASE WHEN r.tokens IS NULL THEN q.rate_refilled_us
                                   ELSE greatest(coalesce(q.rate_refilled_us, {NOW}), {NOW}) END
      FROM room r CROSS JOIN level l,
           (SELECT queue, count(*) AS n FROM claimed GROUP BY queue) AS t
     WHERE (r.weight IS NOT NULL OR r.tokens IS NOT NULL) AND t.queue = r.queue
       AND q.org_id = $1::bigint AND q.queue = r.queue
)
SELECT c.slot, c.id, c.org_id, c.queue, c.generation, c.priority, c.enqueued_us, c.lease_us,
       c.deadline_us, c.attempts, c.max_attempts, c.payload, )SQL" +
                       std::string(kResumeColumns) + "\n  FROM claimed c " + kResumeJoin + R"SQL(
 ORDER BY c.slot
)SQL";
    auto fill = [&text](std::string_view key, const std::string& value) {
        for (auto at = text.find(key); at != std::string::npos; at = text.find(key, at)) {
            text.replace(at, key.size(), value);
            at += value.size();
        }
    };
    fill("{LIMIT}", limit);
    fill("{NOW}", now);
    fill("{LEASE}", lease);
    fill("{QUEUES}", queues);
    fill("{WORKER}", worker);
    // The coalesced aware variant places the jobs in slots they allow (aclaim_exclusion_slots)
    // rather than in claim order.
    fill("{EXCLUDE}", exclusion_predicate(excluding, batch));
    fill("{MATCHED}", excluding && batch ? R"SQL(, matched AS (
    SELECT m.job AS id, m.slot AS pos
      FROM aclaim_exclusion_slots(ARRAY(SELECT id FROM allowed ORDER BY pos), $2::text[]) AS m
))SQL"
                                         : "");
    fill("{SLOTTED}", excluding && batch ? "matched" : "allowed");
    return text;
}
/// kClaim when a served queue has a weight (claim_weighted_text).
inline const Statement kClaimWeighted{"aclaim_claim_weighted",
                                      claim_weighted_text(false),
                                      {"org bigint", "worker text", "limit int", "now_us bigint",
                                       "lease_us bigint", "queues text[]"}};
/// kClaimWeighted when a served queue ever received a job with exclusions.
inline const Statement kClaimWeightedExcluding{
    "aclaim_claim_weighted_excluding",
    claim_weighted_text(false, true),
    {"org bigint", "worker text", "limit int", "now_us bigint", "lease_us bigint",
     "queues text[]"}};

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
/// outcomes, schema/0015) and its audit event commit together. It notifies
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
    RETURNING )SQL" + std::string(kOutcomeReturning) +
                                     R"SQL(
), recorded AS ()SQL" + record_outcomes("done") +
                                     R"SQL(), settled AS ()SQL" +
                                     settle_dependents("done", "$6::bigint") + R"SQL(), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, detail)
    SELECT id, org_id, generation, 'completed', $4::text, aclaim_ts($6::bigint), $5::text FROM done
)
SELECT id, )SQL" + kSettledColumn + R"SQL( FROM done
)SQL",
                                 {"org bigint", "job bigint", "generation bigint", "worker text",
                                  "result_ref text", "now_us bigint"}};

/// How a job that lost an attempt goes on, as SET clauses over the row `j` being updated (its
/// values before the update) and the time parameter {NOW}: with attempts left it waits out its
/// backoff (scheduled, or pending again when the delay is zero), and with none left it is
/// discarded, keeping its last holder. {RETRY} is the condition that the attempt may be retried.
inline std::string retry_or_discard(std::string_view retry, std::string_view now) {
    std::string text = R"SQL(
           state = CASE WHEN NOT ({RETRY}) THEN 'failed'
                        WHEN j.attempts >= j.max_attempts THEN 'discarded'
                        WHEN aclaim_retry_delay(j.id, j.attempts, j.backoff_base_us,
                                                j.backoff_cap_us) > 0 THEN 'scheduled'
                        ELSE 'pending' END,
           run_at = CASE WHEN ({RETRY}) AND j.attempts < j.max_attempts
                         THEN aclaim_ts({NOW} + aclaim_retry_delay(j.id, j.attempts,
                                                                   j.backoff_base_us,
                                                                   j.backoff_cap_us))
                         ELSE j.run_at END,
           assignee = CASE WHEN ({RETRY}) AND j.attempts < j.max_attempts THEN NULL
                           ELSE j.assignee END,
           claimed_at = CASE WHEN ({RETRY}) AND j.attempts < j.max_attempts THEN NULL
                             ELSE j.claimed_at END,
           completed_at = CASE WHEN ({RETRY}) AND j.attempts < j.max_attempts THEN NULL
                               ELSE aclaim_ts({NOW}) END,
           lease_expires_at = NULL)SQL";
    for (auto [key, value] : {std::pair{std::string_view("{RETRY}"), retry},
                              std::pair{std::string_view("{NOW}"), now}}) {
        for (auto at = text.find(key); at != std::string::npos; at = text.find(key, at)) {
            text.replace(at, key.size(), value);
            at += value.size();
        }
    }
    return text;
}

/// The audit kind and the wake after retry_or_discard, for a CTE `r` returning id, org_id,
/// queue, generation, state and run_at_us: 'released' back to the queue (woken, or scheduled
/// for the promoters), 'discarded' or 'failed'.
inline constexpr const char* kRetryEventKind =
    "CASE state WHEN 'discarded' THEN 'discarded' WHEN 'failed' THEN 'failed' ELSE {BACK} END";
inline constexpr const char* kRetryWake =
    "CASE state WHEN 'pending' THEN aclaim_wake(org_id, queue) "
    "WHEN 'scheduled' THEN aclaim_scheduled(run_at_us) END";

inline std::string retry_event_kind(std::string_view back) {
    std::string text = kRetryEventKind;
    text.replace(text.find("{BACK}"), 6, back);
    return text;
}

/// What the audit detail says of where the job went: "; retry 2 of 3 at <time>" (scheduled),
/// "; retry 2 of 3 now" (pending: no backoff) or "; attempt 3 of 3 was the last: discarded". The
/// checker reads the first form. For a CTE `r` as above with attempts and max_attempts.
inline constexpr const char* kRetryDetail =
    "CASE state WHEN 'discarded' THEN '; attempt ' || attempts || ' of ' || max_attempts || "
    "' was the last: discarded' WHEN 'failed' THEN '' WHEN 'scheduled' THEN '; retry ' || "
    "(attempts + 1) || ' of ' || max_attempts || ' at ' || aclaim_ts(run_at_us) ELSE "
    "'; retry ' || (attempts + 1) || ' of ' || max_attempts || ' now' END";

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
    RETURNING )SQL" + kOutcomeReturning +
                                 R"SQL(, aclaim_us(j.run_at) AS run_at_us, j.max_attempts
), recorded AS ()SQL" + record_outcomes("r") +
                                 R"SQL(), settled AS ()SQL" + settle_dependents("r", "$7::bigint") +
                                 R"SQL(), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, detail)
    SELECT id, org_id, generation, )SQL" +
                                 retry_event_kind("'released'") + R"SQL(,
           $4::text, aclaim_ts($7::bigint),
           CASE WHEN state = 'failed' THEN 'failure: ' ELSE 'retryable failure: ' END || $5::text
           || )SQL" + kRetryDetail +
                                 R"SQL(
      FROM r
)
SELECT state, )SQL" + kRetryWake +
                                 ", " + kSettledColumn +
                                 R"SQL( FROM r
)SQL",
                             {"org bigint", "job bigint", "generation bigint", "worker text",
                              "reason text", "retryable bool", "now_us bigint"}};

/// $1 org, $2 job, $3 generation, $4 worker, $5 now. A voluntary release does not use up an
/// attempt, and the job keeps its place (its run_at).
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
    RETURNING id, org_id, queue, generation
), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at)
    SELECT id, org_id, generation, 'released', $4::text, aclaim_ts($5::bigint) FROM r
)
SELECT id, aclaim_wake(org_id, queue) FROM r
)SQL",
    {"org bigint", "job bigint", "generation bigint", "worker text", "now_us bigint"}};

/// Takes back expired leases: {PICK} selects and locks the rows, $1 is now, {DETAIL} is the
/// events' detail. An expired lease uses up its attempt: the retry policy applies, and past
/// max_attempts the job is discarded. A lease that ran into the attempt's deadline says so in the
/// detail, and a parked job (kExpireParks: {PICK} locks `state = 'parked' AND deadline_at <= now`)
/// that its park's deadline passed. {PICK} must lock its rows with the conditions `state =
/// 'assigned' AND lease_expires_at <= now`, or the parked ones: a locking read rechecks them on the
/// current row version, and the lock keeps them true until the UPDATE, which then finds its rows by
/// primary key alone (as kClaim, and for the reason given at kRenewBatch). Each event carries its
/// row's own organization. The reaper's kReclaim and the recovery tool's one-job reclaim
/// (recovery_sql.hpp) are this one text.
inline std::string reclaim_statement(std::string_view pick, std::string_view detail) {
    std::string text = R"SQL(
WITH expired AS MATERIALIZED (
    {PICK}
), r AS (
    UPDATE jobs j SET)SQL" +
                       retry_or_discard("true", "$1::bigint") +
                       R"SQL(,
           last_error = CASE WHEN j.state = 'parked'
                             THEN 'park deadline passed on attempt ' || j.attempts
                             WHEN j.deadline_at <= aclaim_ts($1::bigint)
                             THEN 'run deadline exceeded on attempt ' || j.attempts
                             ELSE 'lease expired on attempt ' || j.attempts END
      FROM expired
     WHERE j.id = expired.id
    RETURNING )SQL" + kOutcomeReturning +
                       R"SQL(, expired.assignee, aclaim_us(j.run_at) AS run_at_us, j.max_attempts
), recorded AS ()SQL" + record_outcomes("r") +
                       R"SQL(), settled AS ()SQL" + settle_dependents("r", "$1::bigint") +
                       R"SQL(), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, detail)
    SELECT id, org_id, generation, )SQL" +
                       retry_event_kind("'reclaimed'") + R"SQL(,
           assignee, aclaim_ts($1::bigint), {DETAIL} || ': ' || last_error || )SQL" +
                       kRetryDetail + R"SQL(
      FROM r
)
SELECT id, org_id, generation, assignee, state, )SQL" +
                       kRetryWake + ", " + kSettledColumn + R"SQL(
  FROM r ORDER BY id
)SQL";
    text.replace(text.find("{PICK}"), 6, pick);
    text.replace(text.find("{DETAIL}"), 8, detail);
    return text;
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
/// completion by, and the worker was told lease_expired for a completion that became visible a
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

/// The coalesced claim's placement of the jobs it takes: the best job in the first slot.
inline constexpr const char* kSlotted = R"SQL(
    SELECT p.id, ($2::text[])[p.slot] AS worker, p.slot
      FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, run_at, id) AS slot
              FROM allowed) AS p
     WHERE p.slot <= cardinality($2::text[]))SQL";
/// The exclusion-aware variant's: each job in a slot whose reviewer it does not exclude
/// (aclaim_exclusion_slots, schema/0025_job_exclusions.sql), the best jobs first.
inline constexpr const char* kExclusionSlotted = R"SQL(
    SELECT m.job AS id, ($2::text[])[m.slot] AS worker, m.slot
      FROM aclaim_exclusion_slots(ARRAY(SELECT id FROM allowed ORDER BY priority DESC, run_at, id),
                                  $2::text[]) AS m)SQL";

/// $1 org, $2 text[] one assignee per slot (a requester asking for k jobs holds k consecutive
/// slots), $3 now, $4 lease length, $5 text[] the queues every requester of the batch serves.
/// The best job goes to the first slot, each slot's assignee read by subscript: a join with the
/// unnested array, whose row estimate is the planner's default of ten, made a nested loop that
/// compared every slot with every job (123,552 comparisons and 69 of a 93 ms statement at 352
/// jobs). {LOCK} as in kClaim, which this is for many requesters.
inline std::string claim_batch_text(bool rated, bool excluding = false) {
    return "WITH " + claim_room("cardinality($2::text[])", "$5::text[]", "$3::bigint", rated) +
           R"SQL(, picked AS MATERIALIZED (
    SELECT id, queue, priority, run_at FROM jobs
     WHERE org_id = $1::bigint AND state = 'pending'
       AND queue IN (SELECT queue FROM room WHERE room > 0))SQL" +
           exclusion_predicate(excluding, true) + R"SQL(
     ORDER BY priority DESC, run_at, id
     LIMIT cardinality($2::text[])
     FOR UPDATE {LOCK}
), allowed AS (
    SELECT p.id, p.priority, p.run_at
      FROM (SELECT id, queue, priority, run_at,
                   row_number() OVER (PARTITION BY queue ORDER BY priority DESC, run_at, id) AS rn
              FROM picked) AS p
      JOIN room USING (queue)
     WHERE p.rn <= room.room
), slotted AS ()SQL" +
           std::string(excluding ? kExclusionSlotted : kSlotted) +
           R"SQL(
), claimed AS (
    UPDATE jobs j
       SET state = 'assigned', generation = greatest(j.generation + 1, (SELECT aclaim_generation_floor()) + 1),
           assignee = slotted.worker,
           claimed_at = aclaim_ts($3::bigint),
           deadline_at = aclaim_ts($3::bigint + j.run_timeout_us),
           lease_expires_at = least(aclaim_ts($3::bigint + $4::bigint),
                                    aclaim_ts($3::bigint + j.run_timeout_us)),
           attempts = j.attempts + 1
      FROM slotted
     WHERE j.id = slotted.id
    RETURNING slotted.slot, j.id, j.org_id, j.queue, j.generation, j.priority,
              aclaim_us(j.enqueued_at) AS enqueued_us, aclaim_us(j.lease_expires_at) AS lease_us,
              aclaim_us(j.deadline_at) AS deadline_us, j.attempts, j.max_attempts, j.payload,
              j.assignee
), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at)
    SELECT id, org_id, generation, 'claimed', assignee, aclaim_ts($3::bigint) FROM claimed
))SQL" + claim_spend("$3::bigint", rated) +
           R"SQL(
SELECT c.slot, c.id, c.org_id, c.queue, c.generation, c.priority, c.enqueued_us, c.lease_us,
       c.deadline_us, c.attempts, c.max_attempts, c.payload, )SQL" +
           std::string(kResumeColumns) + "\n  FROM claimed c " + kResumeJoin + R"SQL(
 ORDER BY c.slot
)SQL";
}
inline const Statement kClaimBatch{
    "aclaim_claim_batch",
    claim_batch_text(false),
    {"org bigint", "workers text[]", "now_us bigint", "lease_us bigint", "queues text[]"}};
/// kClaimBatch when a served queue has a rate limit, as kClaimRated is kClaim's.
inline const Statement kClaimBatchRated{
    "aclaim_claim_batch_rated",
    claim_batch_text(true),
    {"org bigint", "workers text[]", "now_us bigint", "lease_us bigint", "queues text[]"}};

/// kClaimBatch when a served queue has a weight, as kClaimWeighted is kClaim's.
inline const Statement kClaimBatchWeighted{
    "aclaim_claim_batch_weighted",
    claim_weighted_text(true),
    {"org bigint", "workers text[]", "now_us bigint", "lease_us bigint", "queues text[]"}};
/// kClaimBatch, kClaimBatchRated and kClaimBatchWeighted when a served queue ever received a job
/// with exclusions, as kClaimExcluding is kClaim's; the jobs are placed in slots they allow.
inline const Statement kClaimBatchExcluding{
    "aclaim_claim_batch_excluding",
    claim_batch_text(false, true),
    {"org bigint", "workers text[]", "now_us bigint", "lease_us bigint", "queues text[]"}};
inline const Statement kClaimBatchRatedExcluding{
    "aclaim_claim_batch_rated_excluding",
    claim_batch_text(true, true),
    {"org bigint", "workers text[]", "now_us bigint", "lease_us bigint", "queues text[]"}};
inline const Statement kClaimBatchWeightedExcluding{
    "aclaim_claim_batch_weighted_excluding",
    claim_weighted_text(true, true),
    {"org bigint", "workers text[]", "now_us bigint", "lease_us bigint", "queues text[]"}};

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
    RETURNING l.n, l.worker, )SQL" + std::string(kOutcomeReturning) +
                                          R"SQL(
), recorded AS ()SQL" + record_outcomes("done") +
                                          R"SQL(), settled AS ()SQL" +
                                          settle_dependents("done", "$6::bigint") +
                                          R"SQL(), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, detail)
    SELECT id, org_id, generation, 'completed', worker, aclaim_ts($6::bigint), result_ref FROM done
)
SELECT n, true AS applied, )SQL" + kSettledColumn +
                                          R"SQL(, NULL::bigint AS org_id,
       NULL::text AS state, NULL::bigint AS generation, NULL::text AS assignee,
       NULL::bigint AS lease_us, NULL::bigint AS deadline_us, NULL::text AS result_ref
  FROM done
UNION ALL
SELECT l.n, false, NULL, l.org_id, l.state::text, l.generation, coalesce(l.assignee, ''),
       aclaim_us(l.lease_expires_at), aclaim_us(l.deadline_at), coalesce(l.row_result_ref, '')
  FROM locked l
 WHERE l.n NOT IN (SELECT n FROM done)
)SQL",
                                      {"orgs bigint[]", "jobs bigint[]", "generations bigint[]",
                                       "workers text[]", "result_refs text[]", "now_us bigint"}};

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

// Retention (schema/0007_retention.sql): one coordinator at a time prunes finished jobs and keeps
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

/// Every statement a store prepares at connect, in one table.
inline const std::vector<const Statement*> kStatements = {&kScope,
                                                          &kEnqueue,
                                                          &kClaimLocks,
                                                          &kClaimLocksExpecting,
                                                          &kClaim,
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
                                                          &kClaimBatch,
                                                          &kClaimBatchRated,
                                                          &kClaimRated,
                                                          &kClaimWeighted,
                                                          &kClaimBatchWeighted,
                                                          &kRenewBatch,
                                                          &kCompleteBatch,
                                                          &kRetentionTryLock,
                                                          &kRetentionUnlock,
                                                          &kPruneJobs,
                                                          &kEnsurePartitions,
                                                          &kPartitionSummary,
                                                          &kClaimExcluding,
                                                          &kClaimRatedExcluding,
                                                          &kClaimWeightedExcluding,
                                                          &kClaimBatchExcluding,
                                                          &kClaimBatchRatedExcluding,
                                                          &kClaimBatchWeightedExcluding,
                                                          &kEnqueueExcluding};

}  // namespace aclaim::common::sql
