#include "common/store/assignment_store.hpp"

#include <pqxx/pqxx>

#include <unordered_map>

#include "common/store/pg_array.hpp"
#include "common/store/store_sql.hpp"

namespace aclaim::common {

namespace {

constexpr const char* kLockNotAvailable = "55P03";

std::string claim_sql(LockStrategy strategy, const char* text_template = sql::kClaimTemplate) {
    std::string text = text_template;
    const std::string clause = strategy == LockStrategy::SkipLocked ? "SKIP LOCKED"
                               : strategy == LockStrategy::NoWait   ? "NOWAIT"
                                                                    : "";
    text.replace(text.find("{LOCK}"), 6, clause);
    return text;
}

JobState state_of(const pqxx::field& f) {
    auto s = parse_job_state(f.as<std::string>());
    if (!s) throw std::runtime_error("unexpected job state '" + f.as<std::string>() + "'");
    return *s;
}

/// What the rest of a transaction may see when the store runs under row-level security: one
/// organization, or all of them. Does nothing otherwise. Set only when it changes.
class Scope {
public:
    Scope(pqxx::work& txn, bool enabled) : txn_(txn), enabled_(enabled) {}
    void to(OrgId org) { set(std::to_string(org)); }
    void all() { set(sql::kAllOrganizations); }

private:
    void set(const std::string& value) {
        if (!enabled_ || value == current_) return;
        txn_.exec_prepared(sql::kScopeName, value);
        current_ = value;
    }
    pqxx::work& txn_;
    bool enabled_;
    std::string current_;
};

/// Six columns from `first`: org, state, generation, assignee, lease, result_ref.
RowAuthority authority_of(const pqxx::row& r, int first) {
    RowAuthority a;
    a.org_id = r[first].as<OrgId>();
    a.state = state_of(r[first + 1]);
    a.generation = r[first + 2].as<Generation>();
    a.assignee = r[first + 3].as<std::string>();
    if (!r[first + 4].is_null()) a.lease_expires_at = r[first + 4].as<Micros>();
    a.result_ref = r[first + 5].as<std::string>();
    return a;
}

/// The current rows of `jobs` that exist, by id.
std::unordered_map<JobId, RowAuthority> read_authorities(pqxx::work& txn,
                                                         const std::vector<std::int64_t>& jobs) {
    std::unordered_map<JobId, RowAuthority> rows;
    for (const auto& r : txn.exec_prepared(sql::kAuthorityName, pg_array(jobs))) {
        rows.emplace(r[0].as<JobId>(), authority_of(r, 1));
    }
    return rows;
}

std::optional<RowAuthority> row_of(const std::unordered_map<JobId, RowAuthority>& rows, JobId job) {
    const auto found = rows.find(job);
    if (found == rows.end()) return std::nullopt;
    return found->second;
}

/// Whether a refusal is written to the audit log: not for unknown or foreign jobs, so that no
/// event ever crosses organizations, and not for renewals, which are not logged at all.
bool audited(Operation op, Rejection r) {
    return r != Rejection::UnknownJob && r != Rejection::OtherOrganization &&
           op != Operation::Renew;
}

/// The answer for a transition that matched nothing, decided on the current row.
Transition decide(const std::optional<RowAuthority>& row, Operation op, OrgId org,
                  Generation generation, const std::string& worker,
                  const std::string& result_ref, Micros now) {
    Transition t;
    t.rejection = diagnose(row, op, org, generation, worker, result_ref, now, &t.detail);
    if (!t.rejection) {
        t.replayed = true;
        t.state = row->state;
    }
    return t;
}


Lease lease_of(const pqxx::row& row, int first) {
    Lease l;
    l.job_id = row[first].as<JobId>();
    l.org_id = row[first + 1].as<OrgId>();
    l.generation = row[first + 2].as<Generation>();
    l.priority = row[first + 3].as<int>();
    l.enqueued_at = row[first + 4].as<Micros>();
    l.lease_expires_at = row[first + 5].as<Micros>();
    l.attempts = row[first + 6].as<int>();
    l.max_attempts = row[first + 7].as<int>();
    l.payload = row[first + 8].as<std::string>();
    return l;
}

/// The arrays of a coalesced renew or complete, one element per request.
struct TransitionArrays {
    std::string orgs, jobs, generations, workers, result_refs;
};

/// The requests at `indices`, as arrays.
TransitionArrays arrays_of(const std::vector<TransitionRequest>& requests,
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
std::vector<std::vector<std::size_t>> statement_groups(
    const std::vector<TransitionRequest>& requests, bool by_organization) {
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

/// The requests that a fenced update (single or coalesced) did not apply, each answered from its
/// job's current row: the rows read in one statement whatever their organization (to tell a
/// foreign job from an unknown one), each refusal decided on its row, and the audited ones
/// written in one statement, each event in its own job's organization. Refusals of unknown or
/// foreign jobs are not written, so that no event ever crosses organizations. A request for a
/// job that appears more than once in the batch is first tried on its own, as a duplicate of an
/// applied request would be.
template <class ApplyOne>
void settle_unapplied(pqxx::work& txn, Scope& scope, Operation op,
                      const std::vector<TransitionRequest>& requests,
                      const std::vector<bool>& applied, Micros now, std::vector<Transition>& out,
                      ApplyOne apply_one) {
    std::unordered_map<JobId, int> seen;
    for (const auto& q : requests) ++seen[q.job];
    std::vector<std::size_t> pending;
    for (std::size_t i = 0; i < requests.size(); ++i) {
        if (applied[i]) continue;
        if (seen[requests[i].job] > 1) {
            scope.to(requests[i].org);
            if (apply_one(requests[i], out[i])) continue;
        }
        pending.push_back(i);
    }
    if (pending.empty()) return;
    std::vector<std::int64_t> ids;
    for (const std::size_t i : pending) ids.push_back(requests[i].job);
    scope.all();
    const auto rows = read_authorities(txn, ids);
    std::vector<std::int64_t> jobs, orgs, generations;
    std::vector<std::string> workers, details;
    for (const std::size_t i : pending) {
        const auto& q = requests[i];
        out[i] = decide(row_of(rows, q.job), op, q.org, q.generation, q.worker, q.result_ref, now);
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
        txn.exec_prepared(sql::kRejectedBatchName, pg_array(jobs), pg_array(orgs),
                          pg_array(generations), pg_array(workers), now, pg_array(details));
    }
}

/// The fenced update of a single transition matched nothing: answered and audited as a refusal in
/// a coalesced batch is, and committed.
Transition reject(pqxx::work& txn, Scope& scope, Operation op, OrgId org, JobId job,
                  Generation generation, const std::string& worker, const std::string& result_ref,
                  Micros now) {
    const std::vector<TransitionRequest> one{{org, job, generation, worker, result_ref}};
    std::vector<Transition> out(1);
    settle_unapplied(txn, scope, op, one, std::vector<bool>{false}, now, out,
                     [](const TransitionRequest&, Transition&) { return false; });
    txn.commit();
    return out[0];
}

}  // namespace

AssignmentStore::AssignmentStore(const std::string& dsn, StoreOptions options)
    : options_(std::move(options)), conn_(std::make_unique<pqxx::connection>(dsn)) {
    {
        pqxx::nontransaction session(*conn_);
        session.exec("SET application_name = " + session.quote(options_.application_name));
        if (options_.row_security) {
            try {
                session.exec(std::string("SET ROLE ") + sql::kRowSecurityRole);
            } catch (const pqxx::sql_error& e) {
                throw std::runtime_error(
                    std::string("row security: this login cannot act as ") +
                    sql::kRowSecurityRole + " (GRANT " + sql::kRowSecurityRole +
                    " TO the coordinator's login, or run without row security): " + e.what());
            }
        }
    }
    conn_->prepare(sql::kScopeName, sql::kScope);
    conn_->prepare(sql::kEnqueueName, sql::kEnqueue);
    conn_->prepare(sql::kClaimName, claim_sql(options_.lock_strategy));
    conn_->prepare(sql::kRenewName, sql::kRenew);
    conn_->prepare(sql::kCompleteName, sql::kComplete);
    conn_->prepare(sql::kFailName, sql::kFail);
    conn_->prepare(sql::kReleaseName, sql::kRelease);
    conn_->prepare(sql::kReclaimName, sql::kReclaim);
    conn_->prepare(sql::kAuthorityName, sql::kAuthority);
    conn_->prepare(sql::kRejectedBatchName, sql::kRejectedBatch);
    conn_->prepare(sql::kClaimBatchName, claim_sql(options_.lock_strategy, sql::kClaimBatchTemplate));
    conn_->prepare(sql::kRenewBatchName, sql::kRenewBatch);
    conn_->prepare(sql::kCompleteBatchName, sql::kCompleteBatch);
}

AssignmentStore::~AssignmentStore() = default;

bool AssignmentStore::is_open() const { return conn_ && conn_->is_open(); }

pqxx::connection& AssignmentStore::connection() { return *conn_; }

std::vector<JobId> AssignmentStore::enqueue(OrgId org, const std::vector<NewJob>& jobs,
                                            Micros now) {
    std::vector<int> priorities, attempts;
    std::vector<std::string> payloads;
    for (const auto& j : jobs) {
        priorities.push_back(j.priority);
        payloads.push_back(j.payload);
        attempts.push_back(j.max_attempts);
    }
    pqxx::work txn(*conn_, "enqueue");
    Scope(txn, options_.row_security).to(org);
    const pqxx::result r = txn.exec_prepared(sql::kEnqueueName, org, now, pg_array(priorities),
                                             pg_array(payloads), pg_array(attempts));
    txn.commit();
    std::vector<JobId> ids;
    ids.reserve(r.size());
    for (const auto& row : r) ids.push_back(row[0].as<JobId>());
    return ids;
}

ClaimOutcome AssignmentStore::claim(OrgId org, const std::string& worker, int max_jobs,
                                    Micros lease, Micros now) {
    ClaimOutcome out;
    try {
        pqxx::work txn(*conn_, "claim");
        Scope(txn, options_.row_security).to(org);
        if (options_.lock_strategy == LockStrategy::Wait) {
            // Bound only the claim's wait: a completion queued behind a waiting claimer's row
            // lock must still go through.
            txn.exec("SET LOCAL lock_timeout = " + std::to_string(options_.lock_timeout_ms));
        }
        const pqxx::result r =
            txn.exec_prepared(sql::kClaimName, org, worker, max_jobs, now, lease);
        txn.commit();
        for (const auto& row : r) out.leases.push_back(lease_of(row, 0));
    } catch (const pqxx::sql_error& e) {
        if (e.sqlstate() != kLockNotAvailable) throw;
        out.status = options_.lock_strategy == LockStrategy::Wait
                         ? ClaimOutcome::Status::LockTimeout
                         : ClaimOutcome::Status::CandidateLocked;
        return out;
    }
    out.status = out.leases.empty() ? ClaimOutcome::Status::NoWork : ClaimOutcome::Status::Claimed;
    return out;
}

Transition AssignmentStore::renew(OrgId org, JobId job, Generation generation,
                                  const std::string& worker, Micros lease, Micros now) {
    pqxx::work txn(*conn_, "renew");
    Scope scope(txn, options_.row_security);
    scope.to(org);
    const pqxx::result r =
        txn.exec_prepared(sql::kRenewName, org, job, generation, worker, now, lease);
    if (r.empty()) return reject(txn, scope, Operation::Renew, org, job, generation, worker, "", now);
    txn.commit();
    Transition t;
    t.state = JobState::Assigned;
    t.lease_expires_at = r[0][0].as<Micros>();
    return t;
}

Transition AssignmentStore::complete(OrgId org, JobId job, Generation generation,
                                     const std::string& worker, const std::string& result_ref,
                                     Micros now) {
    pqxx::work txn(*conn_, "complete");
    Scope scope(txn, options_.row_security);
    scope.to(org);
    const pqxx::result r =
        txn.exec_prepared(sql::kCompleteName, org, job, generation, worker, result_ref, now);
    if (r.empty()) {
        return reject(txn, scope, Operation::Complete, org, job, generation, worker, result_ref, now);
    }
    txn.commit();
    Transition t;
    t.state = JobState::Completed;
    return t;
}

Transition AssignmentStore::fail(OrgId org, JobId job, Generation generation,
                                 const std::string& worker, const std::string& reason,
                                 bool retryable, Micros now) {
    pqxx::work txn(*conn_, "fail");
    Scope scope(txn, options_.row_security);
    scope.to(org);
    const pqxx::result r =
        txn.exec_prepared(sql::kFailName, org, job, generation, worker, reason, retryable, now);
    if (r.empty()) return reject(txn, scope, Operation::Fail, org, job, generation, worker, "", now);
    txn.commit();
    Transition t;
    t.state = state_of(r[0][0]);
    return t;
}

Transition AssignmentStore::release(OrgId org, JobId job, Generation generation,
                                    const std::string& worker, Micros now) {
    pqxx::work txn(*conn_, "release");
    Scope scope(txn, options_.row_security);
    scope.to(org);
    const pqxx::result r = txn.exec_prepared(sql::kReleaseName, org, job, generation, worker, now);
    if (r.empty()) return reject(txn, scope, Operation::Release, org, job, generation, worker, "", now);
    txn.commit();
    Transition t;
    t.state = JobState::Pending;
    return t;
}

std::optional<RowAuthority> AssignmentStore::authority(JobId job) {
    pqxx::work txn(*conn_, "authority");
    Scope(txn, options_.row_security).all();
    const auto rows = read_authorities(txn, {job});
    txn.commit();
    return row_of(rows, job);
}

std::vector<ClaimOutcome> AssignmentStore::claim_batch(OrgId org,
                                                       const std::vector<ClaimRequest>& requests,
                                                       Micros lease, Micros now) {
    std::vector<ClaimOutcome> out(requests.size());
    // Slot s belongs to owner[s]: each requester holds max_jobs consecutive slots.
    std::vector<std::string> slots;
    std::vector<std::size_t> owner;
    for (std::size_t i = 0; i < requests.size(); ++i) {
        for (int k = 0; k < requests[i].max_jobs; ++k) {
            slots.push_back(requests[i].worker);
            owner.push_back(i);
        }
    }
    try {
        pqxx::work txn(*conn_, "claim_batch");
        Scope(txn, options_.row_security).to(org);
        if (options_.lock_strategy == LockStrategy::Wait) {
            txn.exec("SET LOCAL lock_timeout = " + std::to_string(options_.lock_timeout_ms));
        }
        const pqxx::result r =
            txn.exec_prepared(sql::kClaimBatchName, org, pg_array(slots), now, lease);
        txn.commit();
        for (const auto& row : r) {
            const auto slot = row[0].as<std::size_t>();
            out.at(owner.at(slot - 1)).leases.push_back(lease_of(row, 1));
        }
    } catch (const pqxx::sql_error& e) {
        if (e.sqlstate() != kLockNotAvailable) throw;
        for (auto& o : out) {
            o.leases.clear();
            o.status = options_.lock_strategy == LockStrategy::Wait
                           ? ClaimOutcome::Status::LockTimeout
                           : ClaimOutcome::Status::CandidateLocked;
        }
        return out;
    }
    for (auto& o : out) {
        o.status = o.leases.empty() ? ClaimOutcome::Status::NoWork : ClaimOutcome::Status::Claimed;
    }
    return out;
}

std::vector<Transition> AssignmentStore::renew_batch(
    const std::vector<TransitionRequest>& requests, Micros lease, Micros now) {
    std::vector<Transition> out(requests.size());
    std::vector<bool> applied(requests.size(), false);
    pqxx::work txn(*conn_, "renew_batch");
    Scope scope(txn, options_.row_security);
    for (const auto& group : statement_groups(requests, options_.row_security)) {
        scope.to(requests[group.front()].org);
        const TransitionArrays a = arrays_of(requests, group);
        const pqxx::result r = txn.exec_prepared(sql::kRenewBatchName, a.orgs, a.jobs,
                                                 a.generations, a.workers, now, lease);
        for (const auto& row : r) {
            const auto i = group.at(row[0].as<std::size_t>() - 1);
            applied.at(i) = true;
            out[i].state = JobState::Assigned;
            out[i].lease_expires_at = row[1].as<Micros>();
        }
    }
    // A duplicate of an applied request is applied again, as renew() would.
    settle_unapplied(txn, scope, Operation::Renew, requests, applied, now, out,
                     [&](const TransitionRequest& q, Transition& t) {
                         const pqxx::result one = txn.exec_prepared(
                             sql::kRenewName, q.org, q.job, q.generation, q.worker, now, lease);
                         if (one.empty()) return false;
                         t.state = JobState::Assigned;
                         t.lease_expires_at = one[0][0].as<Micros>();
                         return true;
                     });
    txn.commit();
    return out;
}

std::vector<Transition> AssignmentStore::complete_batch(
    const std::vector<TransitionRequest>& requests, Micros now) {
    std::vector<Transition> out(requests.size());
    std::vector<bool> applied(requests.size(), false);
    pqxx::work txn(*conn_, "complete_batch");
    Scope scope(txn, options_.row_security);
    for (const auto& group : statement_groups(requests, options_.row_security)) {
        scope.to(requests[group.front()].org);
        const TransitionArrays a = arrays_of(requests, group);
        const pqxx::result r = txn.exec_prepared(sql::kCompleteBatchName, a.orgs, a.jobs,
                                                 a.generations, a.workers, a.result_refs, now);
        for (const auto& row : r) {
            const auto i = group.at(row[0].as<std::size_t>() - 1);
            applied.at(i) = true;
            out[i].state = JobState::Completed;
        }
    }
    settle_unapplied(txn, scope, Operation::Complete, requests, applied, now, out,
                     [&](const TransitionRequest& q, Transition& t) {
                         const pqxx::result one =
                             txn.exec_prepared(sql::kCompleteName, q.org, q.job, q.generation,
                                               q.worker, q.result_ref, now);
                         if (one.empty()) return false;
                         t.state = JobState::Completed;
                         return true;
                     });
    txn.commit();
    return out;
}

std::vector<Reclaimed> AssignmentStore::reclaim_expired(Micros now, int limit) {
    pqxx::work txn(*conn_, "reclaim");
    Scope(txn, options_.row_security).all();
    const pqxx::result r = txn.exec_prepared(sql::kReclaimName, now, limit);
    txn.commit();
    std::vector<Reclaimed> out;
    out.reserve(r.size());
    for (const auto& row : r) {
        Reclaimed rc;
        rc.job_id = row[0].as<JobId>();
        rc.org_id = row[1].as<OrgId>();
        rc.generation = row[2].as<Generation>();
        rc.assignee = row[3].is_null() ? "" : row[3].as<std::string>();
        rc.state = state_of(row[4]);
        out.push_back(std::move(rc));
    }
    return out;
}

}  // namespace aclaim::common
