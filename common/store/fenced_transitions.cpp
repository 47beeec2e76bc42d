#include <array>
#include <optional>
#include <pqxx/pqxx>
#include <span>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/store/assignment_store.hpp"
#include "common/store/park_sql.hpp"
#include "common/store/pg_array.hpp"
#include "common/store/pg_time.hpp"
#include "common/store/store_internal.hpp"
#include "common/store/transition_sql.hpp"

// The fenced transitions of a held job: renew, progress, park, complete, fail and release, single
// (one runner, AssignmentStore::fenced) and coalesced, with the diagnosis of what they refused.

namespace aclaim::store {

namespace detail {

/// A row of kAuthority.
RowAuthority authority_of(const pqxx::row& r) {
    RowAuthority a;
    a.org_id = r["org_id"].as<OrgId>();
    a.state = state_of(r["state"]);
    a.generation = r["generation"].as<Generation>();
    a.assignee = r["assignee"].as<std::string>();
    if (!r["lease_us"].is_null()) a.lease_expires_at = r["lease_us"].as<base::Instant>();
    if (!r["deadline_us"].is_null()) a.deadline = r["deadline_us"].as<base::Instant>();
    a.result_ref = r["result_ref"].as<std::string>();
    return a;
}

/// The current rows of `jobs` that exist, by id: kAuthority, or with `shared` kAuthorityShared,
/// which waits for a transaction holding one of them to end.
std::unordered_map<JobId, RowAuthority> read_authorities(pqxx::transaction_base& txn,
                                                         const std::vector<std::int64_t>& jobs,
                                                         bool shared) {
    std::unordered_map<JobId, RowAuthority> rows;
    const auto& statement = shared ? sql::kAuthorityShared : sql::kAuthority;
    for (const auto& r : txn.exec_prepared(statement.name, pg_array(jobs))) {
        rows.emplace(r["id"].as<JobId>(), authority_of(r));
    }
    return rows;
}

std::optional<RowAuthority> row_of(const std::unordered_map<JobId, RowAuthority>& rows, JobId job) {
    const auto found = rows.find(job);
    if (found == rows.end()) return std::nullopt;
    return found->second;
}

/// The requests at `indices`, as arrays.
TransitionArrays arrays_of(std::span<const TransitionRequest> requests,
                           const std::vector<std::size_t>& indices) {
    std::vector<std::int64_t> orgs, jobs, generations;
    std::vector<std::string> workers, refs;
    for (const std::size_t i : indices) {
        const auto& r = requests[i];
        orgs.push_back(r.org);
        jobs.push_back(r.job);
        generations.push_back(r.generation);
        workers.push_back(r.worker);
        refs.push_back(r.result_ref);
    }
    return {pg_array(orgs), pg_array(jobs), pg_array(generations), pg_array(workers),
            pg_array(refs)};
}

/// The requests one coalesced statement may carry: all of them together, or under row-level
/// security one group per organization (in order of first appearance), as a transaction scoped to
/// one organization sees no other.
std::vector<std::vector<std::size_t>> statement_groups(std::span<const TransitionRequest> requests,
                                                       bool by_organization) {
    std::vector<std::vector<std::size_t>> groups;
    std::vector<OrgId> group_org;
    for (std::size_t i = 0; i < requests.size(); ++i) {
        std::size_t g = 0;
        if (by_organization) {
            while (g < groups.size() && group_org[g] != requests[i].org) ++g;
        }
        if (g == groups.size()) {
            groups.emplace_back();
            group_org.push_back(requests[i].org);
        }
        groups[g].push_back(i);
    }
    return groups;
}

/// Marks the requests of `group` that a kCompleteBatch result `r` applied. With `seen`, also keeps
/// the row the statement locked for each request it did not apply, to decide its refusal on.
void mark_completed(const pqxx::result& r, const std::vector<std::size_t>& group,
                    std::vector<bool>& applied, std::vector<Transition>& out,
                    std::vector<std::optional<RowAuthority>>* seen) {
    for (const auto& row : r) {
        const auto i = group.at(row["n"].as<std::size_t>() - 1);
        if (!row["applied"].as<bool>()) {
            if (seen != nullptr) seen->at(i) = authority_of(row);
            continue;
        }
        applied.at(i) = true;
        out[i].state = JobState::Completed;
        out[i].queue = row["queue"].as<std::string>();
    }
}

namespace {

/// Whether a refusal is written to the audit log: not for unknown or foreign jobs, so that no
/// event ever crosses organizations, and not for renewals, which are not logged at all.
bool audited(Operation op, Rejection r) {
    return r != Rejection::UnknownJob && r != Rejection::OtherOrganization &&
           op != Operation::Renew;
}

/// The answer for a transition that matched nothing, decided on the current row.
Transition decide(const std::optional<RowAuthority>& row, Operation op, const TransitionRequest& q,
                  base::Instant now) {
    Transition t;
    t.rejection = diagnose(row, op, q, now, &t.detail);
    if (!t.rejection) {
        t.replayed = true;
        t.state = row->state;
    }
    return t;
}

/// The requests that a fenced update (single or coalesced) did not apply, each answered from its
/// job's current row: the rows read in one statement whatever their organization (to tell a
/// foreign job from an unknown one), each refusal decided on its row, and the audited ones
/// written in one statement, each event in its own job's organization. Refusals of unknown or
/// foreign jobs are not written, so that no event ever crosses organizations. A request for a
/// job that appears more than once in the batch is first tried on its own, as a duplicate of an
/// applied request would be.
/// `known`: when not empty, for each request the row an earlier statement of the transaction
/// locked and left unchanged, which decides its refusal instead of a read now (see
/// kCompleteBatch).
template <class ApplyOne>
void settle_unapplied(pqxx::transaction_base& txn, Scope& scope, Operation op,
                      std::span<const TransitionRequest> requests, const std::vector<bool>& applied,
                      base::Instant now, std::vector<Transition>& out, ApplyOne apply_one,
                      std::span<const std::optional<RowAuthority>> known = {}) {
    std::unordered_map<JobId, int> seen;
    for (const auto& q : requests) ++seen[q.job];
    const auto known_row = [&](std::size_t i) -> std::optional<RowAuthority> {
        return known.empty() ? std::nullopt : known[i];
    };
    std::vector<std::size_t> pending;
    for (std::size_t i = 0; i < requests.size(); ++i) {
        if (applied[i]) continue;
        if (!known_row(i) && seen[requests[i].job] > 1) {
            scope.to(requests[i].org);
            if (apply_one(requests[i], out[i])) continue;
        }
        pending.push_back(i);
    }
    if (pending.empty()) return;
    std::vector<std::int64_t> ids;
    for (const std::size_t i : pending) {
        if (!known_row(i)) ids.push_back(requests[i].job);
    }
    scope.all();
    std::unordered_map<JobId, RowAuthority> rows;
    if (!ids.empty()) rows = read_authorities(txn, ids, true);
    std::vector<std::int64_t> jobs, orgs, generations;
    std::vector<std::string> workers, details;
    for (const std::size_t i : pending) {
        const auto& q = requests[i];
        out[i] = decide(known_row(i) ? known_row(i) : row_of(rows, q.job), op, q, now);
        if (out[i].rejection && audited(op, *out[i].rejection)) {
            jobs.push_back(q.job);
            orgs.push_back(q.org);
            generations.push_back(q.generation);
            workers.push_back(q.worker);
            details.push_back(std::string(to_string(*out[i].rejection)) + ": " + out[i].detail);
        }
    }
    // Each event is in its own job's organization, which the diagnosis found to be the
    // requester's; the statement runs in the scope that sees them all.
    if (!jobs.empty()) {
        txn.exec_prepared(sql::kRejectedBatch.name, pg_array(jobs), pg_array(orgs),
                          pg_array(generations), pg_array(workers), now, pg_array(details));
    }
}

/// The fenced update of a single transition matched nothing: answered and audited as a refusal in
/// a coalesced batch is, and committed (untimed: last_commit() reports applied claims and
/// completions only).
Transition reject(pqxx::work& txn, Scope& scope, Operation op, const TransitionRequest& request,
                  base::Instant now) {
    std::vector<Transition> out(1);
    settle_unapplied(txn, scope, op, std::span(&request, 1), std::vector<bool>{false}, now, out,
                     [](const TransitionRequest&, Transition&) { return false; });
    txn.commit();
    return out[0];
}

/// What tells the single transitions apart besides the statement's arguments and what an applied
/// one answers: the transaction's name, the fenced statement and whether last_commit() times its
/// commit. Only the completion's is timed, as the claims' are: the coordinator reports those
/// commits with the request (db_pool.cpp), and a renewal between two of them must not replace it.
struct FencedStep {
    const char* transaction;
    const char* statement;
    bool timed_commit;
};

FencedStep step_of(Operation op) {
    static const std::array<std::pair<Operation, FencedStep>, 6> steps{{
        {Operation::Renew, {"renew", sql::kRenew.name, false}},
        {Operation::Progress, {"progress", sql::kProgress.name, false}},
        {Operation::Park, {"park", sql::kPark.name, false}},
        {Operation::Complete, {"complete", sql::kComplete.name, true}},
        {Operation::Fail, {"fail", sql::kFail.name, false}},
        {Operation::Release, {"release", sql::kRelease.name, false}},
    }};
    for (const auto& [known, step] : steps) {
        if (known == op) return step;
    }
    throw std::logic_error("no fenced statement for this operation");
}

/// A transition the fence let through, in the state it leaves the job.
Transition applied_as(JobState state, base::Instant lease = base::Instant{}) {
    Transition t;
    t.state = state;
    t.lease_expires_at = lease;
    return t;
}

/// applied_as for a transition that ends the job's lease, with the queue of the applied row `r`.
Transition lease_ended(const pqxx::result& r, JobState state,
                       base::Instant park_deadline = base::Instant{}) {
    Transition t = applied_as(state, park_deadline);
    t.queue = r[0]["queue"].as<std::string>();
    return t;
}

}  // namespace

void settle_completions(pqxx::transaction_base& txn, Scope& scope,
                        std::span<const TransitionRequest> requests,
                        const std::vector<bool>& applied, base::Instant now,
                        std::vector<Transition>& out,
                        std::span<const std::optional<RowAuthority>> known) {
    settle_unapplied(
        txn, scope, Operation::Complete, requests, applied, now, out,
        [&](const TransitionRequest& q, Transition& t) {
            const pqxx::result one = txn.exec_prepared(sql::kComplete.name, q.org, q.job,
                                                       q.generation, q.worker, q.result_ref, now);
            if (one.empty()) return false;
            t = lease_ended(one, JobState::Completed);
            return true;
        },
        known);
}

std::vector<Transition> complete_in(pqxx::work& txn, Scope& scope, bool row_security,
                                    std::span<const TransitionRequest> requests,
                                    base::Instant now) {
    std::vector<Transition> out(requests.size());
    std::vector<bool> applied(requests.size(), false);
    for (const auto& group : statement_groups(requests, row_security)) {
        scope.to(requests[group.front()].org);
        const TransitionArrays a = arrays_of(requests, group);
        mark_completed(txn.exec_prepared(sql::kCompleteBatch.name, a.orgs, a.jobs, a.generations,
                                         a.workers, a.result_refs, now),
                       group, applied, out);
    }
    settle_completions(txn, scope, requests, applied, now, out);
    return out;
}

}  // namespace detail

using detail::Scope;

template <class Applied, class... Args>
Transition AssignmentStore::fenced(Operation op, const TransitionRequest& q, base::Instant now,
                                   Applied applied, const Args&... args) {
    const detail::FencedStep step = detail::step_of(op);
    plan_for(1);
    pqxx::work txn(*conn_, step.transaction);
    Scope scope(txn, options_.row_security);
    scope.to(q.org);
    const pqxx::result r = txn.exec_prepared(step.statement, args...);
    if (r.empty()) return detail::reject(txn, scope, op, q, now);
    if (step.timed_commit) {
        commit(txn);
    } else {
        txn.commit();
    }
    return applied(r);
}

Transition AssignmentStore::renew(const TransitionRequest& q, base::Duration lease,
                                  base::Instant now) {
    return fenced(
        Operation::Renew, q, now,
        [](const pqxx::result& r) {
            return detail::applied_as(JobState::Assigned, r[0]["lease_us"].as<base::Instant>());
        },
        q.org, q.job, q.generation, q.worker, now, lease);
}

Transition AssignmentStore::progress(const TransitionRequest& q, base::Instant now) {
    return fenced(
        Operation::Progress, q, now,
        [](const pqxx::result&) { return detail::applied_as(JobState::Assigned); }, q.org, q.job,
        q.generation, q.worker, now, q.percent, q.note, q.checkpoint);
}

Transition AssignmentStore::park(const TransitionRequest& q, base::Instant now) {
    return fenced(
        Operation::Park, q, now,
        [&q](const pqxx::result& r) {
            return detail::lease_ended(r, JobState::Parked, q.park_deadline);
        },
        q.org, q.job, q.generation, q.worker, now, q.park_deadline, q.note, q.token);
}

Transition AssignmentStore::complete(const TransitionRequest& q, base::Instant now) {
    return fenced(
        Operation::Complete, q, now,
        [](const pqxx::result& r) { return detail::lease_ended(r, JobState::Completed); }, q.org,
        q.job, q.generation, q.worker, q.result_ref, now);
}

Transition AssignmentStore::fail(const TransitionRequest& q, base::Instant now) {
    return fenced(
        Operation::Fail, q, now,
        [](const pqxx::result& r) {
            return detail::lease_ended(r, detail::state_of(r[0]["state"]));
        },
        q.org, q.job, q.generation, q.worker, q.reason, q.retryable, now);
}

Transition AssignmentStore::release(const TransitionRequest& q, base::Instant now) {
    return fenced(
        Operation::Release, q, now,
        [](const pqxx::result& r) { return detail::lease_ended(r, JobState::Pending); }, q.org,
        q.job, q.generation, q.worker, now);
}

std::optional<RowAuthority> AssignmentStore::authority(JobId job) {
    pqxx::work txn(*conn_, "authority");
    Scope(txn, options_.row_security).all();
    const auto rows = detail::read_authorities(txn, {job}, false);
    txn.commit();
    return detail::row_of(rows, job);
}

std::vector<Transition> AssignmentStore::renew_batch(std::span<const TransitionRequest> requests,
                                                     base::Duration lease, base::Instant now) {
    std::vector<Transition> out(requests.size());
    std::vector<bool> applied(requests.size(), false);
    plan_for(requests.size());
    pqxx::work txn(*conn_, "renew_batch");
    Scope scope(txn, options_.row_security);
    for (const auto& group : detail::statement_groups(requests, options_.row_security)) {
        scope.to(requests[group.front()].org);
        const detail::TransitionArrays a = detail::arrays_of(requests, group);
        const pqxx::result r = txn.exec_prepared(sql::kRenewBatch.name, a.orgs, a.jobs,
                                                 a.generations, a.workers, now, lease);
        for (const auto& row : r) {
            const auto i = group.at(row["n"].as<std::size_t>() - 1);
            applied.at(i) = true;
            out[i].state = JobState::Assigned;
            out[i].lease_expires_at = row["lease_us"].as<base::Instant>();
        }
    }
    // A duplicate of an applied request is applied again, as renew() would.
    detail::settle_unapplied(txn, scope, Operation::Renew, requests, applied, now, out,
                             [&](const TransitionRequest& q, Transition& t) {
                                 const pqxx::result one =
                                     txn.exec_prepared(sql::kRenew.name, q.org, q.job, q.generation,
                                                       q.worker, now, lease);
                                 if (one.empty()) return false;
                                 t.state = JobState::Assigned;
                                 t.lease_expires_at = one[0]["lease_us"].as<base::Instant>();
                                 return true;
                             });
    txn.commit();
    return out;
}

std::vector<Transition> AssignmentStore::complete_batch(std::span<const TransitionRequest> requests,
                                                        base::Instant now) {
    plan_for(requests.size());
    pqxx::work txn(*conn_, "complete_batch");
    Scope scope(txn, options_.row_security);
    auto out = detail::complete_in(txn, scope, options_.row_security, requests, now);
    commit(txn);
    return out;
}

}  // namespace aclaim::store
