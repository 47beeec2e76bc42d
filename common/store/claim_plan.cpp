#include "common/store/claim_plan.hpp"

#include <string>
#include <string_view>
#include <vector>

#include "common/store/claim_plan_sql.hpp"
#include "common/store/claim_sql.hpp"

// The claim statement, composed from the fragments of claim_plan_sql.hpp. Its parts in order:
//   WITH room AS (...)              the served unpaused queues and how many jobs each may give
//        [level AS (...)]           (weight) where a queue without a pass starts
//        picked / ranked / allowed  the candidates, locked, within each queue's room
//        [slotted | matched]        (coalesced) which slot each job goes to
//        claimed AS (UPDATE jobs)   the claim itself: generation, assignee, lease
//        logged AS (INSERT ...)     its audit events
//        [spent | weighed]          (rate, weight) the one update of each served queue's row
//   SELECT ...                      the leases, with any progress saved for the job
// Each dimension of the plan picks its fragments and fills their slots; nothing else varies.

namespace aclaim::store {

namespace {

using sql::compose;

std::string room(const ClaimPlan& plan, const sql::ClaimParams& p) {
    const std::string tokens =
        plan.rated ? compose(sql::kClaimServedTokens, {{"NOW", p.now}}) : std::string();
    const std::string served =
        compose(sql::kClaimServed, {{"LIMIT", p.limit},
                                    {"TOKENS", tokens},
                                    {"WEIGHT", plan.weighted ? sql::kClaimServedWeight : ""},
                                    {"QUEUES", p.queues}});
    if (!plan.rated) return compose(sql::kClaimRoom, {{"SERVED", served}});
    return compose(sql::kClaimRoomRated,
                   {{"WEIGHT", plan.weighted ? sql::kClaimRoomWeight : ""}, {"SERVED", served}});
}

const char* exclusion_predicate(const ClaimPlan& plan) {
    if (!plan.excluding) return "";
    return plan.batch ? sql::kClaimNotExcludedForAll : sql::kClaimNotExcluded;
}

/// Whether the result rows carry a slot and come in slot order (sql::ClaimOrder).
const sql::ClaimOrder& order_of(const ClaimPlan& plan) {
    return plan.batch || plan.weighted ? sql::kSlotOrder : sql::kClaimOrder;
}

std::string candidates(const ClaimPlan& plan, const sql::ClaimParams& p) {
    if (!plan.weighted) {
        const sql::ClaimOrder& order = order_of(plan);
        return compose(sql::kClaimCandidates, {{"EXCLUDED", exclusion_predicate(plan)},
                                               {"LIMIT", p.limit},
                                               {"ALLOWED", order.allowed},
                                               {"RANKED", order.ranked}});
    }
    const auto scan = [&](const char* weighed) {
        return compose(
            sql::kClaimQueueScan,
            {{"WEIGHED", weighed}, {"EXCLUDED", exclusion_predicate(plan)}, {"LIMIT", p.limit}});
    };
    return compose(sql::kClaimWeightedCandidates, {{"WEIGHED_SCAN", scan(sql::kClaimOnlyWeighed)},
                                                   {"UNWEIGHED_SCAN", scan("")},
                                                   {"LIMIT", p.limit}});
}

const sql::ClaimPlacement& placement(const ClaimPlan& plan) {
    if (plan.weighted) {
        if (!plan.batch) return sql::kPlaceWeighted;
        return plan.excluding ? sql::kPlaceWeightedSlotsExcluding : sql::kPlaceWeightedSlots;
    }
    if (!plan.batch) return sql::kPlaceSingle;
    return plan.excluding ? sql::kPlaceSlotsExcluding : sql::kPlaceSlots;
}

std::string claimed(const ClaimPlan& plan, const sql::ClaimParams& p) {
    const sql::ClaimPlacement& at = placement(plan);
    const sql::ClaimOrder& order = order_of(plan);
    return compose(sql::kClaimed, {{"WORKER", at.worker},
                                   {"NOW", p.now},
                                   {"LEASE", p.lease},
                                   {"FROM", at.from},
                                   {"ROW", at.row},
                                   {"SLOT", at.slot},
                                   {"RUN_AT", order.run_at},
                                   {"ASSIGNEE", order.assignee},
                                   {"EVENT_WORKER", order.event_worker}});
}

std::string spend(const ClaimPlan& plan, const sql::ClaimParams& p) {
    if (!plan.rated && !plan.weighted) return "";
    const std::string refilled = compose(sql::kClaimRefilled, {{"NOW", p.now}});
    if (!plan.weighted) return compose(sql::kClaimSpent, {{"REFILLED", refilled}});
    const std::string rate_set =
        plan.rated ? compose(sql::kClaimWeighedRateSet, {{"REFILLED", refilled}}) : std::string();
    return compose(
        sql::kClaimWeighed,
        {{"RATE_SET", rate_set}, {"RATE_KEPT", plan.rated ? sql::kClaimWeighedRateKept : ""}});
}

std::string compose_claim(const ClaimPlan& plan) {
    const sql::ClaimParams& p = plan.batch ? sql::kBatchClaimParams : sql::kSingleClaimParams;
    const sql::ClaimOrder& order = order_of(plan);
    return compose(sql::kClaim, {{"ROOM", room(plan, p)},
                                 {"CANDIDATES", candidates(plan, p)},
                                 {"PLACEMENT", placement(plan).ctes},
                                 {"CLAIMED", claimed(plan, p)},
                                 {"SPEND", spend(plan, p)},
                                 {"SLOT", order.slot},
                                 {"RESUME_COLUMNS", sql::kResumeColumns},
                                 {"RESUME_JOIN", sql::kResumeJoin},
                                 {"ORDER", order.order}});
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
                {names.at(plan.index()).c_str(), compose_claim(plan), std::move(params)});
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

}  // namespace aclaim::store
