#include "common/store/claim_plan.hpp"

#include <string>
#include <string_view>
#include <vector>

#include "common/store/claim_sql.hpp"

// The claim statement, composed. Its parts in order:
//   WITH room AS (...)              the served unpaused queues and how many jobs each may give
//        [level AS (...)]           (weight) where a queue without a pass starts
//        picked / ranked / allowed  the candidates, locked, within each queue's room
//        [slotted | matched]        (coalesced) which slot each job goes to
//        claimed AS (UPDATE jobs)   the claim itself: generation, assignee, lease
//        logged AS (INSERT ...)     its audit events
//        [spent | weighed]          (rate, weight) the one update of each served queue's row
//   SELECT ...                      the leases, with any progress saved for the job
// Only pending rows are candidates (a scheduled job becomes pending when its run_at arrives), in
// claim order (priority DESC, run_at, id). The candidate CTEs are MATERIALIZED so that the locked
// set is computed exactly once. A locking read rechecks its conditions on the newest row version,
// so every picked row is pending and locked, and the update finds it by primary key alone: a
// condition on jobs.state there would make the partial index jobs_claim_order a candidate for a
// full scan per job (see kRenewBatch).

namespace aclaim::common {

namespace {

/// The parameters of the plan's shape, as its fragments refer to them.
struct Params {
    std::string limit;   ///< how many jobs the claim takes at most
    std::string now;     ///< now, in microseconds
    std::string lease;   ///< the lease length
    std::string queues;  ///< the queues served
};

Params params_of(const ClaimPlan& plan) {
    if (plan.batch) return {"cardinality($2::text[])", "$3::bigint", "$4::bigint", "$5::text[]"};
    return {"$3::int", "$4::bigint", "$5::bigint", "$6::text[]"};
}

/// Whether the result rows carry a slot and come in slot order: a coalesced claim hands its jobs
/// out by slot, and a weighted claim ranks them by finish, which is not the claim order.
bool slotted(const ClaimPlan& plan) {
    return plan.batch || plan.weighted;
}

// -- room: the served queues that are not paused, with how many jobs each may still hand out:
// the number asked for, or what its concurrency limit leaves.

std::string room(const ClaimPlan& plan, const Params& p) {
    std::string columns = R"SQL(s.queue,
           CASE WHEN q.max_assigned IS NULL THEN )SQL" +
                          p.limit + R"SQL(
                ELSE q.max_assigned - (SELECT count(*) FROM jobs a
                                        WHERE a.org_id = $1::bigint AND a.queue = s.queue
                                          AND a.state = 'assigned')::int END AS room)SQL";
    // Rate: the bucket's whole tokens at now (`tokens`, NULL for a queue without a rate).
    if (plan.rated) {
        columns += R"SQL(,
           aclaim_rate_tokens(q.rate_per_s, q.rate_burst, q.rate_tokens,
                              q.rate_refilled_us, )SQL" +
                   p.now + ") AS tokens";
    }
    // Weight: the queue's weight and its pass (NULL for a queue without a weight).
    if (plan.weighted) columns += ",\n           q.weight, q.weight_pass AS pass";
    std::string served = "SELECT " + columns + R"SQL(
      FROM (SELECT DISTINCT unnest()SQL" +
                         p.queues +
                         R"SQL() AS queue) AS s
      LEFT JOIN job_queues q ON q.org_id = $1::bigint AND q.queue = s.queue
     WHERE q.paused IS NOT TRUE)SQL";
    if (!plan.rated) return "room AS (\n    " + served + "\n)";
    // Rate: no more room than the whole tokens there are.
    return R"SQL(room AS (
    SELECT r.queue, least(r.room, coalesce(floor(r.tokens)::int, r.room)) AS room, r.tokens)SQL" +
           std::string(plan.weighted ? ",\n           r.weight, r.pass" : "") + "\n      FROM (" +
           served + ") AS r\n)";
}

// -- exclusion: the condition on a candidate job, after the scan's other conditions: the single
// claim's worker is not excluded from it; the coalesced claim's slots hold one reviewer at least
// who is not (placement then puts it in such a slot).

std::string exclusion_predicate(const ClaimPlan& plan) {
    if (!plan.excluding) return "";
    return plan.batch ? "\n       AND NOT aclaim_excluded_for_all(id, $2::text[])"
                      : "\n       AND NOT aclaim_excluded(id, $2::text)";
}

// -- the candidates without weights: one scan of jobs_claim_order across the served queues, then
// no more of each queue than its room.

std::string flat_candidates(const ClaimPlan& plan, const Params& p) {
    const bool slots = slotted(plan);
    return R"SQL(picked AS MATERIALIZED (
    SELECT id, queue, priority, run_at FROM jobs
     WHERE org_id = $1::bigint AND state = 'pending'
       AND queue IN (SELECT queue FROM room WHERE room > 0))SQL" +
           exclusion_predicate(plan) + R"SQL(
     ORDER BY priority DESC, run_at, id
     LIMIT )SQL" +
           p.limit +
           R"SQL(
     FOR UPDATE {LOCK}
), allowed AS (
    SELECT )SQL" +
           (slots ? "p.id, p.priority, p.run_at" : "p.id") + R"SQL(
      FROM (SELECT )SQL" +
           (slots ? "id, queue, priority, run_at," : "id, queue,") + R"SQL(
                   row_number() OVER (PARTITION BY queue ORDER BY priority DESC, run_at, id) AS rn
              FROM picked) AS p
      JOIN room USING (queue)
     WHERE p.rn <= room.room
))SQL";
}

// -- weight: each served queue scanned on its own, in claim order, for as many jobs as the claim
// may take from it: a weighted queue through jobs_weighted_order
// (schema/0026_weighted_claim_index.sql), which leads with the queue and holds the pending jobs of
// weighted queues only, so that its scan starts at the queue's first job however the other
// queues' jobs rank. Of those, the claim takes the ones whose finish, pass + k / weight for the
// queue's k-th, is least (stride scheduling, schema/0022_queue_weights.sql), ties to the heavier
// queue, then the queue's name. A served queue without a weight has no finish and gives jobs only
// when the weighted ones have none left to give, by priority among themselves; so it is scanned
// (through jobs_claim_order, as a claim serving it alone is) only when the weighted queues gave
// fewer than the claim takes. A queue starts from its pass, or one unit behind the furthest pass
// served (`level`) if it is further back or has none. The weight is read after the
// organization's lock (kClaimLocks), so a weight set and its jobs marked commit before the claim
// or after it, never between.

std::string queue_scan(const ClaimPlan& plan, const Params& p, std::string_view only_weighed) {
    return R"SQL(
    SELECT c.id, r.queue, c.priority, c.run_at
      FROM room r
     CROSS JOIN LATERAL (
         SELECT id, priority, run_at FROM jobs
          WHERE org_id = $1::bigint AND state = 'pending')SQL" +
           std::string(only_weighed) + " AND queue = r.queue" + exclusion_predicate(plan) +
           R"SQL(
          ORDER BY priority DESC, run_at, id
          LIMIT greatest(least(r.room, )SQL" +
           p.limit + R"SQL(), 0)
            FOR UPDATE {LOCK}) AS c)SQL";
}

std::string weighted_candidates(const ClaimPlan& plan, const Params& p) {
    return R"SQL(level AS (
    SELECT max(pass) - 1 AS floor FROM room WHERE weight IS NOT NULL
), weighed_picked AS MATERIALIZED ()SQL" +
           queue_scan(plan, p, " AND weighed") + R"SQL(
     WHERE r.room > 0 AND r.weight IS NOT NULL
), picked AS MATERIALIZED (
    SELECT id, queue, priority, run_at FROM weighed_picked
    UNION ALL)SQL" +
           queue_scan(plan, p, "") +
           R"SQL(
     WHERE r.room > 0 AND r.weight IS NULL
       AND (SELECT count(*) FROM weighed_picked) < )SQL" +
           p.limit + R"SQL(
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
     LIMIT )SQL" +
           p.limit + "\n)";
}

// -- placement: which rows the update takes and who each goes to. The single claim's go to its
// worker. The coalesced claim's best job goes to the first slot, each slot's assignee read by
// subscript: a join with the unnested array, whose row estimate is the planner's default of ten,
// made a nested loop that compared every slot with every job (123,552 comparisons and 69 of a
// 93 ms statement at 352 jobs). With exclusions each job goes to a slot whose reviewer it does not
// exclude (aclaim_exclusion_slots, schema/0025_job_exclusions.sql), the best jobs first.

struct Placement {
    std::string ctes;    ///< CTEs after `allowed`, each led by ", "
    std::string from;    ///< the update's FROM item
    std::string row;     ///< how the update names that item
    std::string worker;  ///< the assignee of a row
    std::string slot;    ///< the slot a row returns (empty: none)
};

Placement placement(const ClaimPlan& plan) {
    if (plan.weighted) {
        const bool matched = plan.batch && plan.excluding;
        return {matched ? R"SQL(, matched AS (
    SELECT m.job AS id, m.slot AS pos
      FROM aclaim_exclusion_slots(ARRAY(SELECT id FROM allowed ORDER BY pos), $2::text[]) AS m
))SQL"
                        : "",
                matched ? "matched a" : "allowed a", "a",
                plan.batch ? "($2::text[])[a.pos]" : "$2::text", "a.pos AS slot, "};
    }
    if (!plan.batch) return {"", "allowed", "allowed", "$2::text", ""};
    const std::string slotted = plan.excluding ? R"SQL(
    SELECT m.job AS id, ($2::text[])[m.slot] AS worker, m.slot
      FROM aclaim_exclusion_slots(ARRAY(SELECT id FROM allowed ORDER BY priority DESC, run_at, id),
                                  $2::text[]) AS m)SQL"
                                               : R"SQL(
    SELECT p.id, ($2::text[])[p.slot] AS worker, p.slot
      FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, run_at, id) AS slot
              FROM allowed) AS p
     WHERE p.slot <= cardinality($2::text[]))SQL";
    return {", slotted AS (" + slotted + "\n)", "slotted", "slotted", "slotted.worker",
            "slotted.slot, "};
}

// -- the claim: the generation is the next one, or the first of the current timeline's range when
// that is higher (the fencing epoch, schema/0009_fencing_epoch.sql), so that after a failover that
// lost commits no claim repeats a generation granted in the lost history. A lease never runs past
// the attempt's deadline.

std::string claimed(const ClaimPlan& plan, const Params& p, const Placement& at) {
    const bool slots = slotted(plan);
    return R"SQL(claimed AS (
    UPDATE jobs j
       SET state = 'assigned', generation = greatest(j.generation + 1, (SELECT aclaim_generation_floor()) + 1),
           assignee = )SQL" +
           at.worker + R"SQL(,
           claimed_at = aclaim_ts()SQL" +
           p.now + R"SQL(),
           deadline_at = aclaim_ts()SQL" +
           p.now + R"SQL( + j.run_timeout_us),
           lease_expires_at = least(aclaim_ts()SQL" +
           p.now + " + " + p.lease + R"SQL(),
                                    aclaim_ts()SQL" +
           p.now + R"SQL( + j.run_timeout_us)),
           attempts = j.attempts + 1
      FROM )SQL" +
           at.from + "\n     WHERE j.id = " + at.row + R"SQL(.id
    RETURNING )SQL" +
           at.slot +
           R"SQL(j.id, j.org_id, j.queue, j.generation, j.priority,
              aclaim_us(j.enqueued_at) AS enqueued_us, )SQL" +
           (slots ? "" : "aclaim_us(j.run_at) AS run_at_us, ") +
           R"SQL(aclaim_us(j.lease_expires_at) AS lease_us, aclaim_us(j.deadline_at) AS deadline_us,
              j.attempts, j.max_attempts, j.payload)SQL" +
           (slots ? ",\n              j.assignee" : "") + R"SQL(
), logged AS (
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at)
    SELECT id, org_id, generation, 'claimed', )SQL" +
           (slots ? "assignee" : "$2::text") + ", aclaim_ts(" + p.now + ") FROM claimed\n)";
}

// -- spend: one update of each served queue's row that a dimension keeps state in, in the claim's
// statement, under the queue's lock (kClaimLocks): a second update of one row in one statement
// would be lost. Rate: one token of the bucket per job the claim took from the queue (`room` never
// gave more than the whole tokens there were). Weight: the queue's pass moves on by what it gave.
// With rate alone, the one-time EXISTS gate skips the update when no served queue has a rate any
// more (a limit removed since kClaimLocks read it cannot be, as that takes the organization's
// lock, but the statement does not rely on it).

std::string spend(const ClaimPlan& plan, const Params& p) {
    if (!plan.rated && !plan.weighted) return "";
    const std::string refilled =
        "greatest(coalesce(q.rate_refilled_us, " + p.now + "), " + p.now + ")";
    const std::string taken = "(SELECT queue, count(*) AS n FROM claimed GROUP BY queue) AS t";
    const std::string row = "\n       AND q.org_id = $1::bigint AND q.queue = r.queue\n)";
    if (!plan.weighted) {
        return R"SQL(, spent AS (
    UPDATE job_queues q
       SET rate_tokens = r.tokens - t.n,
           rate_refilled_us = )SQL" +
               refilled + R"SQL(
      FROM room r,
           )SQL" +
               taken +
               R"SQL(
     WHERE EXISTS (SELECT 1 FROM room WHERE tokens IS NOT NULL)
       AND r.tokens IS NOT NULL AND t.queue = r.queue)SQL" +
               row;
    }
    std::string set = R"SQL(weight_pass = CASE WHEN r.weight IS NULL THEN q.weight_pass
                              ELSE coalesce(greatest(r.pass, l.floor), 0)
                                   + t.n::numeric / r.weight END)SQL";
    std::string kept = "r.weight IS NOT NULL";
    if (plan.rated) {
        set += R"SQL(,
           rate_tokens = CASE WHEN r.tokens IS NULL THEN q.rate_tokens ELSE r.tokens - t.n END,
           rate_refilled_us = CASE WHEN r.tokens IS NULL THEN q.rate_refilled_us
                                   ELSE )SQL" +
               refilled + " END";
        kept += " OR r.tokens IS NOT NULL";
    }
    return R"SQL(, weighed AS (
    UPDATE job_queues q
       SET )SQL" +
           set +
           R"SQL(
      FROM room r CROSS JOIN level l,
           )SQL" +
           taken + "\n     WHERE (" + kept + ") AND t.queue = r.queue" + row;
}

std::string compose(const ClaimPlan& plan) {
    const Params p = params_of(plan);
    const Placement at = placement(plan);
    const bool slots = slotted(plan);
    return "WITH " + room(plan, p) + ", " +
           (plan.weighted ? weighted_candidates(plan, p) : flat_candidates(plan, p)) + at.ctes +
           ", " + claimed(plan, p, at) + spend(plan, p) + "\nSELECT " + (slots ? "c.slot, " : "") +
           R"SQL(c.id, c.org_id, c.queue, c.generation, c.priority, c.enqueued_us, c.lease_us,
       c.deadline_us, c.attempts, c.max_attempts, c.payload, )SQL" +
           sql::kResumeColumns + "\n  FROM claimed c " + sql::kResumeJoin + "\n ORDER BY " +
           (slots ? "c.slot" : "c.priority DESC, c.run_at_us, c.id") + "\n";
}

/// Every plan's name and statement, composed once. The names live beside the statements, which
/// point into them.
struct ComposedPlans {
    std::array<std::string, kClaimPlanCount> names;
    std::vector<sql::Statement> statements;

    ComposedPlans() {
        statements.reserve(kClaimPlanCount);
        for (const ClaimPlan& plan : all_claim_plans()) {
            names.at(plan.index()) = plan.name();
            std::vector<std::string_view> params =
                plan.batch
                    ? std::vector<std::string_view>{"org bigint", "workers text[]", "now_us bigint",
                                                    "lease_us bigint", "queues text[]"}
                    : std::vector<std::string_view>{"org bigint",      "worker text",
                                                    "limit int",       "now_us bigint",
                                                    "lease_us bigint", "queues text[]"};
            statements.push_back(
                {names.at(plan.index()).c_str(), compose(plan), std::move(params)});
        }
    }
};

}  // namespace

std::string ClaimPlan::name() const {
    const auto bit = [](bool on) { return on ? '1' : '0'; };
    return std::string("aclaim_claim_r") + bit(rated) + 'w' + bit(weighted) + 'x' + bit(excluding) +
           "_b" + bit(batch);
}

std::array<ClaimPlan, kClaimPlanCount> all_claim_plans() {
    std::array<ClaimPlan, kClaimPlanCount> plans{};
    for (std::size_t i = 0; i < kClaimPlanCount; ++i) {
        plans.at(i) = ClaimPlan::of_bits(static_cast<unsigned>(i & 7U), (i & 8U) != 0);
    }
    return plans;
}

const sql::Statement& sql::claim_statement(ClaimPlan plan) {
    static const ComposedPlans composed;
    return composed.statements.at(plan.index());
}

}  // namespace aclaim::common
