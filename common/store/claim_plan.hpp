#pragma once

// The claim as one statement composed from a plan: the dimensions the served queues need, each
// contributing its own fragments to the one text (claim_plan.cpp). kClaimLocks reads which
// dimensions a claim needs; the store prepares a plan's statement on a connection the first time
// a claim there needs it.

#include <array>
#include <cstddef>
#include <string>

#include "common/store/statement.hpp"

namespace aclaim::store {

/// Which dimensions a claim statement covers. Each one costs only the claims that need it: a
/// plan without a dimension composes a text without its fragments.
struct ClaimPlan {
    /// A served queue has a rate limit (schema/baseline/tables.sql): each queue's room is
    /// bounded by the whole tokens of its bucket, and the claim spends them.
    bool rated = false;
    /// A served queue has a weight (schema/baseline/tables.sql): each served queue is scanned
    /// on its own and the jobs taken in stride order, the weighted queues' passes moved on.
    bool weighted = false;
    /// Exclusions may apply (schema/baseline/tables.sql): a candidate the claimer is excluded
    /// from is passed over, and a coalesced claim places each job in a slot it allows.
    bool excluding = false;
    /// The coalesced claim for many requesters, one slot each job ($2 one assignee a slot), or
    /// the single claim for one worker ($2 the worker, $3 how many).
    bool batch = false;

    bool operator==(const ClaimPlan&) const = default;

    /// The dimensions the claim's locks guard (kClaimLocksExpecting's bits): rated 1, weighted 2,
    /// excluding 4. The shape (single or coalesced) is the caller's, not the queues'.
    unsigned dimension_bits() const {
        return (rated ? 1U : 0U) | (weighted ? 2U : 0U) | (excluding ? 4U : 0U);
    }
    static ClaimPlan of_bits(unsigned bits, bool batch) {
        return {(bits & 1U) != 0, (bits & 2U) != 0, (bits & 4U) != 0, batch};
    }
    /// The plan's place among kClaimPlanCount: its dimension bits, then the shape.
    std::size_t index() const { return dimension_bits() | (batch ? 8U : 0U); }
    /// The name its statement is prepared under, e.g. aclaim_claim_r1w0x1_b0.
    std::string name() const;
};

/// How many plans there are: every combination of the dimensions, single and coalesced.
inline constexpr std::size_t kClaimPlanCount = 16;

/// Every plan, in index order.
std::array<ClaimPlan, kClaimPlanCount> all_claim_plans();

namespace sql {

/// The claim statement of `plan`: its text composed the first time any plan is asked for, once
/// for the process. Single: $1 org, $2 worker, $3 limit, $4 now, $5 lease length, $6 text[]
/// queues served. Coalesced: $1 org, $2 text[] one assignee per slot (a requester asking for k
/// jobs holds k consecutive slots), $3 now, $4 lease length, $5 text[] the queues every requester
/// of the batch serves. Runs after kClaimLocks.
const Statement& claim_statement(ClaimPlan plan);

}  // namespace sql

}  // namespace aclaim::store
