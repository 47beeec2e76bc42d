#include <algorithm>
#include <array>
#include <optional>
#include <pqxx/pipeline>
#include <pqxx/pqxx>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/store/assignment_store.hpp"
#include "common/store/claim_plan.hpp"
#include "common/store/claim_sql.hpp"
#include "common/store/pg_array.hpp"
#include "common/store/pg_time.hpp"
#include "common/store/session_sql.hpp"
#include "common/store/store_internal.hpp"
#include "common/store/transition_sql.hpp"

// The claim: single, coalesced, and after completions in one transaction (complete_and_claim),
// statement by statement or sent together with its COMMIT. Each runs kClaimLocks, reads from it
// the plan the served queues need, and runs that plan's statement (claim_plan.hpp).

namespace aclaim::store {

namespace {

using detail::Scope;

/// An EXECUTE of a statement the session has not prepared.
constexpr const char* kNoSuchStatement = "26000";
/// The claim's locks found that the served queues call for another claim plan than the one sent
/// with them (schema/baseline/tables.sql).
constexpr const char* kClaimPlanChanged = "ACV01";
/// Organizations' sets of served queues whose claim plan a store remembers (claim_plans_); past
/// this, the least recently used half is forgotten, and their next mixed transaction runs
/// statement by statement.
constexpr std::size_t kClaimPlansKept = 1024;
/// What complete_and_claim_sent_together sends by name, beside the claim plan's statement.
const std::array<const sql::Statement*, 3> kSentTogether = {
    &sql::kScope, &sql::kClaimLocksExpecting, &sql::kCompleteBatch};

/// The jobs a set of claims asks for.
std::size_t slots(std::span<const ClaimRequest> claims) {
    std::size_t n = 0;
    for (const auto& c : claims) n += static_cast<std::size_t>(std::max(0, c.max_jobs));
    return n;
}

/// A row of a claim statement.
Lease lease_of(const pqxx::row& row) {
    Lease l;
    l.job_id = row["id"].as<JobId>();
    l.org_id = row["org_id"].as<OrgId>();
    l.generation = row["generation"].as<Generation>();
    l.priority = row["priority"].as<int>();
    l.enqueued_at = row["enqueued_us"].as<base::Instant>();
    l.lease_expires_at = row["lease_us"].as<base::Instant>();
    l.attempts = row["attempts"].as<int>();
    l.max_attempts = row["max_attempts"].as<int>();
    l.payload = row["payload"].as<std::string>();
    l.queue = row["queue"].as<std::string>();
    if (!row["deadline_us"].is_null()) l.deadline = row["deadline_us"].as<base::Instant>();
    if (!row["resume_generation"].is_null()) {
        l.resume = SavedProgress{
            row["resume_generation"].as<Generation>(), row["resume_percent"].as<int>(),
            row["resume_note"].as<std::string>(), row["resume_checkpoint"].as<std::string>()};
    }
    return l;
}

/// The queues a claim serves, as the text array its statements take.
std::string served_queues(const std::vector<std::string>& queues) {
    return queues.empty() ? pg_array(std::vector<std::string>{std::string(base::kDefaultQueue)})
                          : pg_array(queues);
}

/// The plan a row of kClaimLocks calls for, single or coalesced (`batch`). `epoch`: the exclusions
/// epoch this connection's previous claim read (none yet: unknown), updated; a claim that sees it
/// move has the exclusion dimension, as its snapshot may predate a queue's flag (kClaimLocks says
/// why that suffices).
ClaimPlan plan_of(const pqxx::row& r, std::optional<std::int64_t>& epoch, bool batch) {
    // Before this connection's first claim the epoch is unknown; it can only matter if some queue
    // was ever flagged (the sequence still at 0 says none was before this claim's lock).
    const auto seen = r["exclusions_epoch"].as<std::int64_t>();
    const bool moved = epoch ? *epoch != seen : seen != 0;
    epoch = seen;
    return {r["rated"].as<std::int64_t>() > 0, r["weighted"].as<std::int64_t>() > 0,
            moved || r["excluding"].as<std::int64_t>() > 0, batch};
}

/// Whether a row of kClaimLocks found a served queue with a concurrency limit.
bool capped_of(const pqxx::row& r) {
    return r["capped"].as<std::int64_t>() > 0;
}

/// The first statement of a claim transaction (kClaimLocks). Returns the plan the served queues
/// call for; `capped` says whether one of them has a concurrency limit.
ClaimPlan begin_claim(pqxx::work& txn, OrgId org, const std::string& queues,
                      std::optional<std::int64_t>& epoch, bool& capped, bool batch) {
    const pqxx::result r = txn.exec_prepared(sql::kClaimLocks.name, org, queues);
    capped = capped_of(r[0]);
    return plan_of(r[0], epoch, batch);
}

/// After a claim that handed out `got` of `wanted` jobs: when a rate limit may have held it back,
/// the instant a served bucket that holds back pending jobs refills (kRateRefill).
std::optional<base::Instant> refill_after(pqxx::transaction_base& txn, OrgId org,
                                          const std::string& queues, bool rated, std::size_t got,
                                          std::size_t wanted, base::Instant now) {
    if (!rated || got >= wanted) return std::nullopt;
    const pqxx::result r = txn.exec_prepared(sql::kRateRefill.name, org, queues, now);
    if (r.empty() || r[0]["refill_us"].is_null()) return std::nullopt;
    return r[0]["refill_us"].as<base::Instant>();
}

/// The slots of a coalesced claim: slot s belongs to owner[s], each requester holding max_jobs
/// consecutive slots, each slot named by its requester (the coalesced claim's $2).
struct ClaimSlots {
    std::vector<std::string> workers;
    std::vector<std::size_t> owner;
};

ClaimSlots slots_of(std::span<const ClaimRequest> requests) {
    ClaimSlots out;
    for (std::size_t i = 0; i < requests.size(); ++i) {
        for (int k = 0; k < requests[i].max_jobs; ++k) {
            out.workers.push_back(requests[i].worker);
            out.owner.push_back(i);
        }
    }
    return out;
}

std::string queues_of(std::span<const ClaimRequest> requests) {
    return served_queues(requests.empty() ? std::vector<std::string>{} : requests[0].queues);
}

/// Each requester's outcome from the rows of a coalesced claim statement `r`, with `refill`, the
/// instant a rate limit holds a short requester back to (refill_after), and `capped`, whether a
/// served queue has a concurrency limit (ClaimOutcome::slot_bound).
std::vector<ClaimOutcome> claim_outcomes(const pqxx::result& r, const ClaimSlots& slots,
                                         std::span<const ClaimRequest> requests,
                                         std::optional<base::Instant> refill, bool capped) {
    std::vector<ClaimOutcome> out(requests.size());
    for (const auto& row : r) {
        const auto slot = row["slot"].as<std::size_t>();
        out.at(slots.owner.at(slot - 1)).leases.push_back(lease_of(row));
    }
    for (std::size_t i = 0; i < out.size(); ++i) {
        auto& o = out[i];
        o.status = o.leases.empty() ? ClaimOutcome::Status::NoWork : ClaimOutcome::Status::Claimed;
        if (std::cmp_less(o.leases.size(), requests[i].max_jobs)) {
            o.refill_at = refill;
            o.slot_bound = capped;
        }
    }
    return out;
}

/// An EXECUTE of a prepared statement with its parameters as quoted literals, for statements
/// sent together in one message.
std::string execute_text(const pqxx::transaction_base& txn, const char* name,
                         std::initializer_list<std::string> params) {
    std::string arguments;
    for (const auto& p : params) {
        if (!arguments.empty()) arguments += ", ";
        arguments += txn.quote(p);
    }
    return sql::compose(sql::kExecute, {{"NAME", name}, {"ARGUMENTS", arguments}});
}

/// Ends the transaction a session opened with BEGIN, when what it sent cannot be used. A broken
/// connection is thrown; any other failure of the ROLLBACK leaves the session to the next BEGIN,
/// which a failed transaction would refuse, and so to the caller's own error handling.
void roll_back(pqxx::transaction_base& session) {
    try {
        session.exec(sql::kRollback);
    } catch (const pqxx::broken_connection&) {
        throw;
    } catch (const pqxx::failure&) {  // NOLINT(bugprone-empty-catch): see above
    }
}

}  // namespace

const char* AssignmentStore::prepare_claim(const ClaimPlan& plan) {
    const sql::Statement& statement = sql::claim_statement(plan);
    if (!claim_plans_registered_.test(plan.index())) {
        // Registered only: the connection prepares it on the server when it first runs.
        conn_->prepare(statement.name, statement.text);
        claim_plans_registered_.set(plan.index());
    }
    return statement.name;
}

std::vector<ClaimOutcome> AssignmentStore::claim_in(pqxx::work& txn, OrgId org,
                                                    std::span<const ClaimRequest> requests,
                                                    base::Duration lease, base::Instant now,
                                                    const ClaimPlan* known) {
    const ClaimSlots slots = slots_of(requests);
    const std::string queues = queues_of(requests);
    const ClaimPlan plan =
        known != nullptr ? *known
                         : begin_claim(txn, org, queues, exclusions_epoch_, claim_capped_, true);
    last_claim_statement_ = prepare_claim(plan);
    const pqxx::result r =
        txn.exec_prepared(last_claim_statement_, org, pg_array(slots.workers), now, lease, queues);
    return claim_outcomes(
        r, slots, requests,
        refill_after(txn, org, queues, plan.rated, r.size(), slots.owner.size(), now),
        claim_capped_);
}

ClaimOutcome AssignmentStore::claim(OrgId org, const ClaimRequest& request, base::Duration lease,
                                    base::Instant now) {
    ClaimOutcome out;
    plan_for(static_cast<std::size_t>(request.max_jobs));
    pqxx::work txn(*conn_, "claim");
    Scope(txn, options_.row_security).to(org);
    const std::string queues = served_queues(request.queues);
    const ClaimPlan plan = begin_claim(txn, org, queues, exclusions_epoch_, claim_capped_, false);
    last_claim_statement_ = prepare_claim(plan);
    const pqxx::result r = txn.exec_prepared(last_claim_statement_, org, request.worker,
                                             request.max_jobs, now, lease, queues);
    out.refill_at = refill_after(txn, org, queues, plan.rated, r.size(),
                                 static_cast<std::size_t>(request.max_jobs), now);
    commit(txn);
    for (const auto& row : r) out.leases.push_back(lease_of(row));
    out.slot_bound = claim_capped_ && std::cmp_less(r.size(), request.max_jobs);
    out.status = out.leases.empty() ? ClaimOutcome::Status::NoWork : ClaimOutcome::Status::Claimed;
    return out;
}

std::vector<ClaimOutcome> AssignmentStore::claim_batch(OrgId org,
                                                       std::span<const ClaimRequest> requests,
                                                       base::Duration lease, base::Instant now) {
    plan_for(slots(requests));
    pqxx::work txn(*conn_, "claim_batch");
    Scope(txn, options_.row_security).to(org);
    std::vector<ClaimOutcome> out = claim_in(txn, org, requests, lease, now, nullptr);
    commit(txn);
    return out;
}

std::string AssignmentStore::plan_key(OrgId org, const std::string& queues) {
    // Each organization has its own settings for a queue of a given name.
    return std::to_string(org) + ':' + queues;
}

void AssignmentStore::remember_plan(const std::string& key, unsigned bits) {
    if (claim_plans_.size() >= kClaimPlansKept && !claim_plans_.contains(key)) {
        // Forget the least recently used half at once: one pass every kClaimPlansKept / 2
        // new keys.
        std::vector<std::uint64_t> uses;
        uses.reserve(claim_plans_.size());
        for (const auto& entry : claim_plans_) uses.push_back(entry.second.used);
        const auto middle = uses.begin() + static_cast<std::ptrdiff_t>(uses.size() / 2);
        std::nth_element(uses.begin(), middle, uses.end());
        const std::uint64_t cut = *middle;
        std::erase_if(claim_plans_, [cut](const auto& entry) { return entry.second.used < cut; });
    }
    claim_plans_[key] = {bits, ++plan_uses_};
}

CompletedAndClaimed AssignmentStore::complete_and_claim(
    std::span<const TransitionRequest> completions, OrgId org, std::span<const ClaimRequest> claims,
    base::Duration lease, base::Instant now) {
    plan_for(completions.size() + slots(claims));
    if (auto together = complete_and_claim_sent_together(completions, org, claims, lease, now)) {
        return std::move(*together);
    }
    CompletedAndClaimed out;
    pqxx::work txn(*conn_, "complete_and_claim");
    Scope scope(txn, options_.row_security);
    // The claim's locks first, as every claim takes them, so that an operator's statement that
    // holds the organization's lock exclusively and then locks rows cannot wait on a row this
    // transaction completed while this one waits on the organization's lock.
    scope.to(org);
    const std::string queues = queues_of(claims);
    const ClaimPlan plan = begin_claim(txn, org, queues, exclusions_epoch_, claim_capped_, true);
    // What the next mixed transaction of this organization's queues sends with its COMMIT.
    remember_plan(plan_key(org, queues), plan.dimension_bits());
    out.completions = detail::complete_in(txn, scope, options_.row_security, completions, now);
    // The completions' scope may have moved to another organization, or to all of them.
    scope.to(org);
    out.claims = claim_in(txn, org, claims, lease, now, &plan);
    commit(txn);
    return out;
}

std::optional<CompletedAndClaimed> AssignmentStore::complete_and_claim_sent_together(
    std::span<const TransitionRequest> completions, OrgId org, std::span<const ClaimRequest> claims,
    base::Duration lease, base::Instant now) {
    const std::string queues = queues_of(claims);
    const std::string key = plan_key(org, queues);
    const auto known = claim_plans_.find(key);
    if (known == claim_plans_.end()) return std::nullopt;
    known->second.used = ++plan_uses_;
    const ClaimPlan expected = ClaimPlan::of_bits(known->second.bits, true);
    const char* claim_statement = prepare_claim(expected);
    try {
        if (!sent_together_ready_) {
            for (const sql::Statement* statement : kSentTogether) {
                conn_->prepare_now(statement->name);
            }
            sent_together_ready_ = true;
        }
        // An EXECUTE needs the plan's statement on the session already; once it is, this asks
        // nothing of the server.
        conn_->prepare_now(claim_statement);
    } catch (const pqxx::broken_connection&) {
        throw;
    } catch (const pqxx::sql_error&) {
        // A schema older than the guard (schema/baseline/tables.sql): statement by statement.
        return std::nullopt;
    }
    const ClaimSlots slots = slots_of(claims);
    const auto groups = detail::statement_groups(completions, options_.row_security);
    pqxx::result locks;
    pqxx::result claimed;
    std::vector<pqxx::result> completed(groups.size());
    {
        pqxx::nontransaction session(*conn_, "complete_and_claim");
        try {
            // BEGIN, every statement and COMMIT in one message (pqxx::pipeline: one simple
            // query). A statement that fails leaves the transaction aborted and the rest of the
            // message, COMMIT included, unrun; so does the claim's locks finding that the served
            // queues now call for another claim plan (kClaimLocksExpecting).
            pqxx::pipeline batch(session, "complete_and_claim");
            batch.retain(static_cast<int>(2 * groups.size() + 8));
            std::string scoped;
            const auto scope_to = [&](OrgId o) {
                if (!options_.row_security || scoped == std::to_string(o)) return;
                scoped = std::to_string(o);
                batch.insert(execute_text(session, sql::kScope.name, {scoped}));
            };
            batch.insert(sql::kBegin);
            // In the order complete_and_claim runs them: the claim's locks first.
            scope_to(org);
            const auto locks_id = batch.insert(execute_text(
                session, sql::kClaimLocksExpecting.name,
                {std::to_string(org), queues, std::to_string(expected.dimension_bits()),
                 // Before any claim on this session, 0: as plan_of, any flag moved it.
                 std::to_string(exclusions_epoch_.value_or(0))}));
            std::vector<pqxx::pipeline::query_id> completed_ids;
            for (const auto& group : groups) {
                scope_to(completions[group.front()].org);
                const detail::TransitionArrays a = detail::arrays_of(completions, group);
                completed_ids.push_back(
                    batch.insert(execute_text(session, sql::kCompleteBatch.name,
                                              {a.orgs, a.jobs, a.generations, a.workers,
                                               a.result_refs, pqxx::to_string(now)})));
            }
            scope_to(org);
            const auto claimed_id =
                batch.insert(execute_text(session, claim_statement,
                                          {std::to_string(org), pg_array(slots.workers),
                                           pqxx::to_string(now), pqxx::to_string(lease), queues}));
            batch.insert(sql::kCommit);
            batch.complete();
            locks = batch.retrieve(locks_id);
            for (std::size_t g = 0; g < groups.size(); ++g) {
                completed[g] = batch.retrieve(completed_ids[g]);
            }
            claimed = batch.retrieve(claimed_id);
            while (!batch.empty()) batch.retrieve();
        } catch (const pqxx::broken_connection&) {
            throw;
        } catch (const pqxx::sql_error& e) {
            // Nothing of it committed. Done again statement by statement, which says exactly
            // what went wrong; a session that lost its prepared statements prepares them again
            // first, and queues whose claim plan changed are looked up again.
            roll_back(session);
            if (e.sqlstate() == kNoSuchStatement) sent_together_ready_ = false;
            if (e.sqlstate() == kClaimPlanChanged) claim_plans_.erase(key);
            return std::nullopt;
        } catch (const pqxx::failure&) {
            roll_back(session);
            return std::nullopt;
        }
        session.commit();
    }
    // Committed. What is left reads what the statements returned, and, only when there is some,
    // settles what they did not apply in a transaction of its own.
    last_commit_ = {};
    ++sent_together_;
    // The guard held, so the locks call for the statement that ran; this reads their epoch.
    plan_of(locks[0], exclusions_epoch_, true);
    claim_capped_ = capped_of(locks[0]);
    last_claim_statement_ = claim_statement;
    CompletedAndClaimed out;
    out.completions.resize(completions.size());
    std::vector<bool> applied(completions.size(), false);
    // The claim that followed may have taken a refused completion's job again: each refusal is
    // decided on the row its statement locked, not on the row as the claim left it.
    std::vector<std::optional<RowAuthority>> seen(completions.size());
    for (std::size_t g = 0; g < groups.size(); ++g) {
        detail::mark_completed(completed[g], groups[g], applied, out.completions, &seen);
    }
    const bool short_of_rate = expected.rated && claimed.size() < slots.owner.size();
    std::optional<base::Instant> refill;
    if (short_of_rate || std::find(applied.begin(), applied.end(), false) != applied.end()) {
        try {
            pqxx::work txn(*conn_, "complete_and_claim_settle");
            Scope scope(txn, options_.row_security);
            detail::settle_completions(txn, scope, completions, applied, now, out.completions,
                                       seen);
            scope.to(org);
            refill = refill_after(txn, org, queues, expected.rated, claimed.size(),
                                  slots.owner.size(), now);
            commit(txn);
        } catch (const pqxx::broken_connection&) {
            throw;
        } catch (const pqxx::failure& e) {
            // The claims and the completions that applied are committed: this transaction's
            // failure must not read as the whole one's. Reported as a commit whose outcome is
            // unknown, which the caller resolves from each job's row.
            throw pqxx::in_doubt_error(
                std::string("committed, then settling what it did not apply failed: ") + e.what());
        }
    }
    out.claims = claim_outcomes(claimed, slots, claims, refill, claim_capped_);
    return out;
}

}  // namespace aclaim::store
