#pragma once

// The fragments of the claim statement, as templates whose {SLOTS} claim_plan.cpp fills for a
// plan (sql::compose). Parts of one statement, never prepared on their own. $1 is the
// organization in every plan; $2 the worker (single) or one assignee per slot (coalesced); the
// other parameters by the plan's shape (ClaimParams).
//
// Only pending rows are candidates (a scheduled job becomes pending when its run_at arrives), in
// claim order (priority DESC, run_at, id). The candidate CTEs are MATERIALIZED so that the locked
// set is computed exactly once, and lock FOR UPDATE SKIP LOCKED: a row another transaction holds
// is passed over, so a claim never waits on a row lock nor fails on one. A locking read rechecks
// its conditions on the newest row version, so every picked row is pending and locked, and the
// update finds it by primary key alone: a condition on jobs.state there would make the partial
// index jobs_claim_order a candidate for a full scan per job (see kRenewBatch).

namespace aclaim::store::sql {

/// The parameters of a plan's shape as the fragments refer to them: how many jobs the claim takes
/// at most, now in microseconds, the lease length, the queues served.
struct ClaimParams {
    const char* limit;
    const char* now;
    const char* lease;
    const char* queues;
};
inline constexpr ClaimParams kSingleClaimParams{"$3::int", "$4::bigint", "$5::bigint",
                                                "$6::text[]"};
inline constexpr ClaimParams kBatchClaimParams{"cardinality($2::text[])", "$3::bigint",
                                               "$4::bigint", "$5::text[]"};

/// The whole statement: {ROOM} (kClaimRoom or kClaimRoomRated), {CANDIDATES} (kClaimCandidates
/// or kClaimWeightedCandidates), {PLACEMENT} the placement's CTEs, {CLAIMED} (kClaimed), {SPEND}
/// (kClaimSpent, kClaimWeighed or nothing), and the result: the leases, with any progress saved
/// for the job (kResumeColumns, kResumeJoin), by slot or in claim order (ClaimOrder).
inline constexpr const char* kClaim = R"SQL(WITH {ROOM}, {CANDIDATES}{PLACEMENT}, {CLAIMED}{SPEND}
SELECT {SLOT}c.id, c.org_id, c.queue, c.generation, c.priority, c.enqueued_us, c.lease_us,
       c.deadline_us, c.attempts, c.max_attempts, c.payload, {RESUME_COLUMNS}
  FROM claimed c {RESUME_JOIN}
 ORDER BY {ORDER}
)SQL";

/// Whether the result rows carry a slot and come in slot order: a coalesced claim hands its jobs
/// out by slot, and a weighted claim ranks them by finish, which is not the claim order. What
/// each fragment selects and returns for either.
struct ClaimOrder {
    const char* allowed;       ///< kClaimCandidates' {ALLOWED}
    const char* ranked;        ///< kClaimCandidates' {RANKED}
    const char* run_at;        ///< kClaimed's {RUN_AT}
    const char* assignee;      ///< kClaimed's {ASSIGNEE}
    const char* event_worker;  ///< kClaimed's {EVENT_WORKER}
    const char* slot;          ///< kClaim's {SLOT}
    const char* order;         ///< kClaim's {ORDER}
};
inline constexpr ClaimOrder kSlotOrder{"p.id, p.priority, p.run_at",
                                       "id, queue, priority, run_at,",
                                       "",
                                       ",\n              j.assignee",
                                       "assignee",
                                       "c.slot, ",
                                       "c.slot"};
inline constexpr ClaimOrder kClaimOrder{
    "p.id",     "id, queue,", "aclaim_us(j.run_at) AS run_at_us, ", "",
    "$2::text", "",           "c.priority DESC, c.run_at_us, c.id"};

// -- room: the served queues that are not paused, with how many jobs each may still hand out:
// the number asked for, or what its concurrency limit leaves.

/// The served queues and their room. {TOKENS}: kClaimServedTokens (rate) or nothing; {WEIGHT}:
/// kClaimServedWeight (weight) or nothing.
inline constexpr const char* kClaimServed = R"SQL(SELECT s.queue,
           CASE WHEN q.max_assigned IS NULL THEN {LIMIT}
                ELSE q.max_assigned - (SELECT count(*) FROM jobs a
                                        WHERE a.org_id = $1::bigint AND a.queue = s.queue
                                          AND a.state = 'assigned')::int END AS room{TOKENS}{WEIGHT}
      FROM (SELECT DISTINCT unnest({QUEUES}) AS queue) AS s
      LEFT JOIN job_queues q ON q.org_id = $1::bigint AND q.queue = s.queue
     WHERE q.paused IS NOT TRUE)SQL";
/// Rate: the bucket's whole tokens at now (`tokens`, NULL for a queue without a rate).
inline constexpr const char* kClaimServedTokens = R"SQL(,
           aclaim_rate_tokens(q.rate_per_s, q.rate_burst, q.rate_tokens,
                              q.rate_refilled_us, {NOW}) AS tokens)SQL";
/// Weight: the queue's weight and its pass (NULL for a queue without a weight).
inline constexpr const char* kClaimServedWeight = ",\n           q.weight, q.weight_pass AS pass";
/// The room CTE of kClaimServed.
inline constexpr const char* kClaimRoom = "room AS (\n    {SERVED}\n)";
/// Rate: no more room than the whole tokens there are. {WEIGHT}: kClaimRoomWeight or nothing.
inline constexpr const char* kClaimRoomRated = R"SQL(room AS (
    SELECT r.queue, least(r.room, coalesce(floor(r.tokens)::int, r.room)) AS room, r.tokens{WEIGHT}
      FROM ({SERVED}) AS r
))SQL";
inline constexpr const char* kClaimRoomWeight = ",\n           r.weight, r.pass";

// -- exclusion: the condition on a candidate job, after the scan's other conditions ({EXCLUDED}):
// the single claim's worker is not excluded from it; the coalesced claim's slots hold one
// reviewer at least who is not (placement then puts it in such a slot).

inline constexpr const char* kClaimNotExcluded = "\n       AND NOT aclaim_excluded(id, $2::text)";
inline constexpr const char* kClaimNotExcludedForAll =
    "\n       AND NOT aclaim_excluded_for_all(id, $2::text[])";

/// The candidates without weights: one scan of jobs_claim_order across the served queues, then no
/// more of each queue than its room.
inline constexpr const char* kClaimCandidates = R"SQL(picked AS MATERIALIZED (
    SELECT id, queue, priority, run_at FROM jobs
     WHERE org_id = $1::bigint AND state = 'pending'
       AND queue IN (SELECT queue FROM room WHERE room > 0){EXCLUDED}
     ORDER BY priority DESC, run_at, id
     LIMIT {LIMIT}
     FOR UPDATE SKIP LOCKED
), allowed AS (
    SELECT {ALLOWED}
      FROM (SELECT {RANKED}
                   row_number() OVER (PARTITION BY queue ORDER BY priority DESC, run_at, id) AS rn
              FROM picked) AS p
      JOIN room USING (queue)
     WHERE p.rn <= room.room
))SQL";

// -- weight: each served queue scanned on its own, in claim order, for as many jobs as the claim
// may take from it: a weighted queue through jobs_weighted_order
// (schema/baseline/tables.sql), which leads with the queue and holds the pending jobs of
// weighted queues only, so that its scan starts at the queue's first job however the other
// queues' jobs rank. Of those, the claim takes the ones whose finish, pass + k / weight for the
// queue's k-th, is least (stride scheduling, schema/baseline/tables.sql), ties to the heavier
// queue, then the queue's name. A served queue without a weight has no finish and gives jobs only
// when the weighted ones have none left to give, by priority among themselves; so it is scanned
// (through jobs_claim_order, as a claim serving it alone is) only when the weighted queues gave
// fewer than the claim takes. A queue starts from its pass, or one unit behind the furthest pass
// served (`level`) if it is further back or has none. The weight is read after the
// organization's lock (kClaimLocks), so a weight set and its jobs marked commit before the claim
// or after it, never between.

/// One served queue's scan. {WEIGHED}: kClaimOnlyWeighed for the weighted queues' scan, nothing
/// for the others'.
inline constexpr const char* kClaimQueueScan = R"SQL(
    SELECT c.id, r.queue, c.priority, c.run_at
      FROM room r
     CROSS JOIN LATERAL (
         SELECT id, priority, run_at FROM jobs
          WHERE org_id = $1::bigint AND state = 'pending'{WEIGHED} AND queue = r.queue{EXCLUDED}
          ORDER BY priority DESC, run_at, id
          LIMIT greatest(least(r.room, {LIMIT}), 0)
            FOR UPDATE SKIP LOCKED) AS c)SQL";
inline constexpr const char* kClaimOnlyWeighed = " AND weighed";

/// The weighted candidates: {WEIGHED_SCAN} and {UNWEIGHED_SCAN} are kClaimQueueScan's two.
inline constexpr const char* kClaimWeightedCandidates = R"SQL(level AS (
    SELECT max(pass) - 1 AS floor FROM room WHERE weight IS NOT NULL
), weighed_picked AS MATERIALIZED ({WEIGHED_SCAN}
     WHERE r.room > 0 AND r.weight IS NOT NULL
), picked AS MATERIALIZED (
    SELECT id, queue, priority, run_at FROM weighed_picked
    UNION ALL{UNWEIGHED_SCAN}
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
))SQL";

// -- placement: which rows the update takes and who each goes to. The single claim's go to its
// worker. The coalesced claim's best job goes to the first slot, each slot's assignee read by
// subscript: a join with the unnested array, whose row estimate is the planner's default of ten,
// made a nested loop that compared every slot with every job (123,552 comparisons and 69 of a
// 93 ms statement at 352 jobs). With exclusions each job goes to a slot whose reviewer it does not
// exclude (aclaim_exclusion_slots, schema/definitions/functions/aclaim_exclusion_slots.sql), the
// best jobs first.

struct ClaimPlacement {
    const char* ctes;    ///< CTEs after `allowed`, each led by ", " ({PLACEMENT})
    const char* from;    ///< the update's FROM item
    const char* row;     ///< how the update names that item
    const char* worker;  ///< the assignee of a row
    const char* slot;    ///< the slot a row returns (empty: none)
};
inline constexpr ClaimPlacement kPlaceSingle{"", "allowed", "allowed", "$2::text", ""};
inline constexpr ClaimPlacement kPlaceSlots{R"SQL(, slotted AS (
    SELECT p.id, ($2::text[])[p.slot] AS worker, p.slot
      FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, run_at, id) AS slot
              FROM allowed) AS p
     WHERE p.slot <= cardinality($2::text[])
))SQL",
                                            "slotted", "slotted", "slotted.worker",
                                            "slotted.slot, "};
inline constexpr ClaimPlacement kPlaceSlotsExcluding{R"SQL(, slotted AS (
    SELECT m.job AS id, ($2::text[])[m.slot] AS worker, m.slot
      FROM aclaim_exclusion_slots(ARRAY(SELECT id FROM allowed ORDER BY priority DESC, run_at, id),
                                  $2::text[]) AS m
))SQL",
                                                     "slotted", "slotted", "slotted.worker",
                                                     "slotted.slot, "};
inline constexpr ClaimPlacement kPlaceWeighted{"", "allowed a", "a", "$2::text", "a.pos AS slot, "};
inline constexpr ClaimPlacement kPlaceWeightedSlots{"", "allowed a", "a", "($2::text[])[a.pos]",
                                                    "a.pos AS slot, "};
inline constexpr ClaimPlacement kPlaceWeightedSlotsExcluding{
    R"SQL(, matched AS (
    SELECT m.job AS id, m.slot AS pos
      FROM aclaim_exclusion_slots(ARRAY(SELECT id FROM allowed ORDER BY pos), $2::text[]) AS m
))SQL",
    "matched a", "a", "($2::text[])[a.pos]", "a.pos AS slot, "};

/// The claim itself, and its audit events. The generation is the next one, or the first of the
/// current timeline's range when that is higher (the fencing epoch,
/// schema/baseline/tables.sql), so that after a failover that lost commits no claim repeats a
/// generation granted in the lost history. A lease never runs past the attempt's deadline.
inline constexpr const char* kClaimed = R"SQL(claimed AS (
    UPDATE jobs j
       SET state = 'assigned', generation = greatest(j.generation + 1, (SELECT aclaim_generation_floor()) + 1),
           assignee = {WORKER},
           claimed_at = aclaim_ts({NOW}),
           deadline_at = aclaim_ts({NOW} + j.run_timeout_us),
           lease_expires_at = least(aclaim_ts({NOW} + {LEASE}),
                                    aclaim_ts({NOW} + j.run_timeout_us)),
           attempts = j.attempts + 1
      FROM {FROM}
     WHERE j.id = {ROW}.id
    RETURNING {SLOT}j.id, j.org_id, j.queue, j.generation, j.priority,
              aclaim_us(j.enqueued_at) AS enqueued_us, {RUN_AT}aclaim_us(j.lease_expires_at) AS lease_us, aclaim_us(j.deadline_at) AS deadline_us,
              j.attempts, j.max_attempts, j.payload{ASSIGNEE}
), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at)
    SELECT id, org_id, generation, 'claimed', {EVENT_WORKER}, aclaim_ts({NOW}) FROM claimed
))SQL";

// -- spend: one update of each served queue's row that a dimension keeps state in, in the claim's
// statement, under the queue's lock (kClaimLocks): a second update of one row in one statement
// would be lost. Rate: one token of the bucket per job the claim took from the queue (`room` never
// gave more than the whole tokens there were). Weight: the queue's pass moves on by what it gave.
// With rate alone, the one-time EXISTS gate skips the update when no served queue has a rate any
// more (a limit removed since kClaimLocks read it cannot be, as that takes the organization's
// lock, but the statement does not rely on it).

/// A bucket's refill instant after the claim: {NOW}, or later if it was refilled ahead of it.
inline constexpr const char* kClaimRefilled =
    "greatest(coalesce(q.rate_refilled_us, {NOW}), {NOW})";
/// Rate alone. {REFILLED}: kClaimRefilled.
inline constexpr const char* kClaimSpent = R"SQL(, spent AS (
    UPDATE job_queues q
       SET rate_tokens = r.tokens - t.n,
           rate_refilled_us = {REFILLED}
      FROM room r,
           (SELECT queue, count(*) AS n FROM claimed GROUP BY queue) AS t
     WHERE EXISTS (SELECT 1 FROM room WHERE tokens IS NOT NULL)
       AND r.tokens IS NOT NULL AND t.queue = r.queue
       AND q.org_id = $1::bigint AND q.queue = r.queue
))SQL";
/// Weight, and rate with it: {RATE_SET} kClaimWeighedRateSet and {RATE_KEPT}
/// kClaimWeighedRateKept, or nothing for either.
inline constexpr const char* kClaimWeighed = R"SQL(, weighed AS (
    UPDATE job_queues q
       SET weight_pass = CASE WHEN r.weight IS NULL THEN q.weight_pass
                              ELSE coalesce(greatest(r.pass, l.floor), 0)
                                   + t.n::numeric / r.weight END{RATE_SET}
      FROM room r CROSS JOIN level l,
           (SELECT queue, count(*) AS n FROM claimed GROUP BY queue) AS t
     WHERE (r.weight IS NOT NULL{RATE_KEPT}) AND t.queue = r.queue
       AND q.org_id = $1::bigint AND q.queue = r.queue
))SQL";
/// {REFILLED}: kClaimRefilled.
inline constexpr const char* kClaimWeighedRateSet = R"SQL(,
           rate_tokens = CASE WHEN r.tokens IS NULL THEN q.rate_tokens ELSE r.tokens - t.n END,
           rate_refilled_us = CASE WHEN r.tokens IS NULL THEN q.rate_refilled_us
                                   ELSE {REFILLED} END)SQL";
inline constexpr const char* kClaimWeighedRateKept = " OR r.tokens IS NOT NULL";

}  // namespace aclaim::store::sql
