#include "common/store/assignment_store.hpp"

#include <algorithm>
#include <array>
#include <optional>
#include <pqxx/pipeline>
#include <pqxx/pqxx>
#include <span>
#include <stdexcept>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/store/new_job_arrays.hpp"
#include "common/store/park_sql.hpp"
#include "common/store/pg_array.hpp"
#include "common/store/pg_time.hpp"
#include "common/store/session_sql.hpp"
#include "common/store/store_sql.hpp"

namespace aclaim::common {

namespace {

constexpr const char* kLockNotAvailable = "55P03";
/// An EXECUTE of a statement the session has not prepared.
constexpr const char* kNoSuchStatement = "26000";
/// The claim's locks found that the served queues call for another claim statement than the one
/// sent with them (schema/0028_claim_variant_guard.sql).
constexpr const char* kClaimVariantChanged = "ACV01";
/// Organizations' sets of served queues whose claim variant a store remembers (claim_variants_);
/// past this, the least recently used half is forgotten, and their next mixed transaction runs
/// statement by statement.
constexpr std::size_t kClaimVariantsKept = 1024;
/// What complete_and_claim_sent_together sends by name.
const std::array<const sql::Statement*, 9> kSentTogether = {&sql::kScope,
                                                            &sql::kClaimLocksExpecting,
                                                            &sql::kCompleteBatch,
                                                            &sql::kClaimBatch,
                                                            &sql::kClaimBatchRated,
                                                            &sql::kClaimBatchWeighted,
                                                            &sql::kClaimBatchExcluding,
                                                            &sql::kClaimBatchRatedExcluding,
                                                            &sql::kClaimBatchWeightedExcluding};

/// A statement's text as prepared: its {LOCK} clauses, if any (the weighted claim has two),
/// filled for the strategy.
std::string prepared_text(const sql::Statement& statement, LockStrategy strategy) {
    std::string text = statement.text;
    const std::string clause = strategy == LockStrategy::SkipLocked ? "SKIP LOCKED"
                               : strategy == LockStrategy::NoWait   ? "NOWAIT"
                                                                    : "";
    for (auto at = text.find("{LOCK}"); at != std::string::npos; at = text.find("{LOCK}", at)) {
        text.replace(at, 6, clause);
        at += clause.size();
    }
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
    Scope(pqxx::transaction_base& txn, bool enabled) : txn_(txn), enabled_(enabled) {}
    void to(OrgId org) { set(std::to_string(org)); }
    void all() { set(sql::kAllOrganizations); }
    /// The transaction is scoped to org already (its scope statement went out another way).
    void scoped_to(OrgId org) {
        if (enabled_) current_ = std::to_string(org);
    }

  private:
    void set(const std::string& value) {
        if (!enabled_ || value == current_) return;
        txn_.exec_prepared(sql::kScope.name, value);
        current_ = value;
    }
    pqxx::transaction_base& txn_;
    bool enabled_;
    std::string current_;
};

/// The jobs a set of claims asks for.
std::size_t slots(std::span<const ClaimRequest> claims) {
    std::size_t n = 0;
    for (const auto& c : claims) n += static_cast<std::size_t>(std::max(0, c.max_jobs));
    return n;
}

/// A row of kAuthority.
RowAuthority authority_of(const pqxx::row& r) {
    RowAuthority a;
    a.org_id = r["org_id"].as<OrgId>();
    a.state = state_of(r["state"]);
    a.generation = r["generation"].as<Generation>();
    a.assignee = r["assignee"].as<std::string>();
    if (!r["lease_us"].is_null()) a.lease_expires_at = r["lease_us"].as<Instant>();
    if (!r["deadline_us"].is_null()) a.deadline = r["deadline_us"].as<Instant>();
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

/// Whether a refusal is written to the audit log: not for unknown or foreign jobs, so that no
/// event ever crosses organizations, and not for renewals, which are not logged at all.
bool audited(Operation op, Rejection r) {
    return r != Rejection::UnknownJob && r != Rejection::OtherOrganization &&
           op != Operation::Renew;
}

/// The answer for a transition that matched nothing, decided on the current row.
Transition decide(const std::optional<RowAuthority>& row, Operation op, const TransitionRequest& q,
                  Instant now) {
    Transition t;
    t.rejection = diagnose(row, op, q, now, &t.detail);
    if (!t.rejection) {
        t.replayed = true;
        t.state = row->state;
    }
    return t;
}

/// A row of kClaim or kClaimBatch (or their rated variants).
Lease lease_of(const pqxx::row& row) {
    Lease l;
    l.job_id = row["id"].as<JobId>();
    l.org_id = row["org_id"].as<OrgId>();
    l.generation = row["generation"].as<Generation>();
    l.priority = row["priority"].as<int>();
    l.enqueued_at = row["enqueued_us"].as<Instant>();
    l.lease_expires_at = row["lease_us"].as<Instant>();
    l.attempts = row["attempts"].as<int>();
    l.max_attempts = row["max_attempts"].as<int>();
    l.payload = row["payload"].as<std::string>();
    l.queue = row["queue"].as<std::string>();
    if (!row["deadline_us"].is_null()) l.deadline = row["deadline_us"].as<Instant>();
    if (!row["resume_generation"].is_null()) {
        l.resume = SavedProgress{
            row["resume_generation"].as<Generation>(), row["resume_percent"].as<int>(),
            row["resume_note"].as<std::string>(), row["resume_checkpoint"].as<std::string>()};
    }
    return l;
}

/// The queues a claim serves, as the text array its statements take.
std::string served_queues(const std::vector<std::string>& queues) {
    return queues.empty() ? pg_array(std::vector<std::string>{std::string(kDefaultQueue)})
                          : pg_array(queues);
}

/// Which claim statement the served queues need (kClaimLocks): the one claims ran before rate
/// limits and weights existed unless a served queue has either.
struct ClaimVariant {
    bool rated = false;      ///< a served queue has a rate limit
    bool weighted = false;   ///< a served queue has a weight
    bool excluding = false;  ///< exclusions may apply (schema/0025_job_exclusions.sql)

    bool operator==(const ClaimVariant&) const = default;
    unsigned bits() const {
        return (rated ? 1U : 0U) | (weighted ? 2U : 0U) | (excluding ? 4U : 0U);
    }
    static ClaimVariant of_bits(unsigned b) {
        return {(b & 1U) != 0, (b & 2U) != 0, (b & 4U) != 0};
    }
};

/// What a row of kClaimLocks says of the served queues. `epoch`: the exclusions epoch this
/// connection's previous claim read (none yet: unknown), updated; a claim that sees it move runs
/// the exclusion-aware variant, as its snapshot may predate a queue's flag (kClaimLocks says why
/// that suffices).
ClaimVariant variant_of(const pqxx::row& r, std::optional<std::int64_t>& epoch) {
    // Before this connection's first claim the epoch is unknown; it can only matter if some queue
    // was ever flagged (the sequence still at 0 says none was before this claim's lock).
    const auto seen = r["exclusions_epoch"].as<std::int64_t>();
    const bool moved = epoch ? *epoch != seen : seen != 0;
    epoch = seen;
    return {r["rated"].as<std::int64_t>() > 0, r["weighted"].as<std::int64_t>() > 0,
            moved || r["excluding"].as<std::int64_t>() > 0};
}

/// The first statement of a claim transaction (kClaimLocks), then, for the wait strategy, the
/// bound on the claim's own lock wait.
ClaimVariant begin_claim(pqxx::work& txn, OrgId org, const std::string& queues,
                         const StoreOptions& options, std::optional<std::int64_t>& epoch) {
    const pqxx::result r = txn.exec_prepared(sql::kClaimLocks.name, org, queues);
    if (options.lock_strategy == LockStrategy::Wait) {
        // Bound only the claim's wait: a completion queued behind a waiting claimer's row
        // lock must still go through.
        txn.exec_params(sql::kSetLocalLockTimeout.text, std::to_string(options.lock_timeout_ms));
    }
    return variant_of(r[0], epoch);
}

const char* single_claim(ClaimVariant v) {
    if (v.excluding) {
        if (v.weighted) return sql::kClaimWeightedExcluding.name;
        return v.rated ? sql::kClaimRatedExcluding.name : sql::kClaimExcluding.name;
    }
    if (v.weighted) return sql::kClaimWeighted.name;
    return v.rated ? sql::kClaimRated.name : sql::kClaim.name;
}

const char* batch_claim(ClaimVariant v) {
    if (v.excluding) {
        if (v.weighted) return sql::kClaimBatchWeightedExcluding.name;
        return v.rated ? sql::kClaimBatchRatedExcluding.name : sql::kClaimBatchExcluding.name;
    }
    if (v.weighted) return sql::kClaimBatchWeighted.name;
    return v.rated ? sql::kClaimBatchRated.name : sql::kClaimBatch.name;
}

/// After a claim that handed out `got` of `wanted` jobs: when a rate limit may have held it back,
/// the instant a served bucket that holds back pending jobs refills (kRateRefill).
std::optional<Instant> refill_after(pqxx::transaction_base& txn, OrgId org,
                                    const std::string& queues, bool rated, std::size_t got,
                                    std::size_t wanted, Instant now) {
    if (!rated || got >= wanted) return std::nullopt;
    const pqxx::result r = txn.exec_prepared(sql::kRateRefill.name, org, queues, now);
    if (r.empty() || r[0]["refill_us"].is_null()) return std::nullopt;
    return r[0]["refill_us"].as<Instant>();
}

/// The arrays of a coalesced renew or complete, one element per request.
struct TransitionArrays {
    std::string orgs, jobs, generations, workers, result_refs;
};

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
                      Instant now, std::vector<Transition>& out, ApplyOne apply_one,
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
/// a coalesced batch is, and committed.
Transition reject(pqxx::work& txn, Scope& scope, Operation op, const TransitionRequest& request,
                  Instant now) {
    std::vector<Transition> out(1);
    settle_unapplied(txn, scope, op, std::span(&request, 1), std::vector<bool>{false}, now, out,
                     [](const TransitionRequest&, Transition&) { return false; });
    txn.commit();
    return out[0];
}

/// What claim_in needs of the store beyond the transaction: its options, its exclusions epoch
/// (begin_claim) and where to record the statement it ran.
struct ClaimContext {
    const StoreOptions& options;
    std::optional<std::int64_t>& epoch;
    const char*& statement;
};

/// The slots of a coalesced claim: slot s belongs to owner[s], each requester holding max_jobs
/// consecutive slots, each slot named by its requester (kClaimBatch's $2).
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
/// instant a rate limit holds a short requester back to (refill_after).
std::vector<ClaimOutcome> claim_outcomes(const pqxx::result& r, const ClaimSlots& slots,
                                         std::span<const ClaimRequest> requests,
                                         std::optional<Instant> refill) {
    std::vector<ClaimOutcome> out(requests.size());
    for (const auto& row : r) {
        const auto slot = row["slot"].as<std::size_t>();
        out.at(slots.owner.at(slot - 1)).leases.push_back(lease_of(row));
    }
    for (std::size_t i = 0; i < out.size(); ++i) {
        auto& o = out[i];
        o.status = o.leases.empty() ? ClaimOutcome::Status::NoWork : ClaimOutcome::Status::Claimed;
        if (std::cmp_less(o.leases.size(), requests[i].max_jobs)) o.refill_at = refill;
    }
    return out;
}

/// claim_batch's statement (and, with take_locks, the claim's locks first) in `txn`, which is
/// scoped to org. `variant`: what the locks, taken by the caller, found of the served queues.
std::vector<ClaimOutcome> claim_in(pqxx::work& txn, const ClaimContext& context, OrgId org,
                                   std::span<const ClaimRequest> requests, Duration lease,
                                   Instant now, bool take_locks, ClaimVariant variant) {
    const ClaimSlots slots = slots_of(requests);
    const std::string queues = queues_of(requests);
    if (take_locks) variant = begin_claim(txn, org, queues, context.options, context.epoch);
    context.statement = batch_claim(variant);
    const pqxx::result r =
        txn.exec_prepared(context.statement, org, pg_array(slots.workers), now, lease, queues);
    return claim_outcomes(
        r, slots, requests,
        refill_after(txn, org, queues, variant.rated, r.size(), slots.owner.size(), now));
}

/// Marks the requests of `group` that a kCompleteBatch result `r` applied. With `seen`, also keeps
/// the row the statement locked for each request it did not apply, to decide its refusal on.
void mark_completed(const pqxx::result& r, const std::vector<std::size_t>& group,
                    std::vector<bool>& applied, std::vector<Transition>& out,
                    std::vector<std::optional<RowAuthority>>* seen = nullptr) {
    for (const auto& row : r) {
        const auto i = group.at(row["n"].as<std::size_t>() - 1);
        if (!row["applied"].as<bool>()) {
            if (seen != nullptr) seen->at(i) = authority_of(row);
            continue;
        }
        applied.at(i) = true;
        out[i].state = JobState::Completed;
    }
}

/// The completions a coalesced statement did not apply, answered as complete() would answer
/// them (settle_unapplied, a duplicate tried once more on its own).
void settle_completions(pqxx::transaction_base& txn, Scope& scope,
                        std::span<const TransitionRequest> requests,
                        const std::vector<bool>& applied, Instant now, std::vector<Transition>& out,
                        std::span<const std::optional<RowAuthority>> known = {}) {
    settle_unapplied(
        txn, scope, Operation::Complete, requests, applied, now, out,
        [&](const TransitionRequest& q, Transition& t) {
            const pqxx::result one = txn.exec_prepared(sql::kComplete.name, q.org, q.job,
                                                       q.generation, q.worker, q.result_ref, now);
            if (one.empty()) return false;
            t.state = JobState::Completed;
            return true;
        },
        known);
}

/// An EXECUTE of a prepared statement with its parameters as quoted literals, for statements
/// sent together in one message.
std::string execute_text(const pqxx::transaction_base& txn, const char* name,
                         std::initializer_list<std::string> params) {
    std::string text = std::string("EXECUTE ") + name + "(";
    bool first = true;
    for (const auto& p : params) {
        if (!first) text += ", ";
        first = false;
        text += txn.quote(p);
    }
    return text + ")";
}

/// Ends the transaction a session opened with BEGIN, when what it sent cannot be used. A broken
/// connection is thrown; any other failure of the ROLLBACK leaves the session to the next BEGIN,
/// which a failed transaction would refuse, and so to the caller's own error handling.
void roll_back(pqxx::transaction_base& session) {
    try {
        session.exec("ROLLBACK");
    } catch (const pqxx::broken_connection&) {
        throw;
    } catch (const pqxx::failure&) {  // NOLINT(bugprone-empty-catch): see above
    }
}

/// complete_batch's statements in `txn`, without the commit.
std::vector<Transition> complete_in(pqxx::work& txn, Scope& scope, bool row_security,
                                    std::span<const TransitionRequest> requests, Instant now) {
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

}  // namespace

void act_as_row_security_role(pqxx::connection& conn) {
    try {
        pqxx::nontransaction session(conn);
        session.exec(sql::kActAsRowSecurityRole.text);
    } catch (const pqxx::broken_connection&) {
        throw;
    } catch (const pqxx::sql_error& e) {
        throw std::runtime_error(std::string("row security is on but this login cannot act as ") +
                                 sql::kRowSecurityRole +
                                 " (migrate the schema, GRANT the role to the login, or pass "
                                 "--row-security off): " +
                                 e.what());
    }
}

AssignmentStore::AssignmentStore(const std::string& dsn, StoreOptions options)
    : options_(std::move(options)), conn_(std::make_unique<pqxx::connection>(dsn)) {
    {
        pqxx::nontransaction session(*conn_);
        session.exec_params(sql::kSetApplicationName.text, options_.application_name);
        // Every statement here runs in milliseconds; a JIT compile costs tens of them. A claim
        // batch forced past jit_above_cost took 50-72 ms against 5-7 ms without (drills/bench
        // found no statement past it, the highest plan cost 52k of 100k, but a large batch on a
        // large table under a generic plan can get there, and would pay it every execution).
        session.exec(sql::kJitOff.text);
    }
    if (options_.row_security) act_as_row_security_role(*conn_);
    for (const auto* list : {&sql::kStatements, &sql::kParkStatements}) {
        for (const sql::Statement* statement : *list) {
            conn_->prepare(statement->name, prepared_text(*statement, options_.lock_strategy));
        }
    }
}

AssignmentStore::~AssignmentStore() = default;

void AssignmentStore::plan_for(std::size_t jobs) {
    const bool generic = jobs < options_.generic_plans_below;
    if (generic == generic_plans_) return;
    pqxx::nontransaction session(*conn_);
    session.exec(generic ? sql::kGenericPlans.text : sql::kPlannerChoosesPlans.text);
    generic_plans_ = generic;
}

bool AssignmentStore::is_open() const {
    return conn_ && conn_->is_open();
}

pqxx::connection& AssignmentStore::connection() {
    return *conn_;
}

void AssignmentStore::commit(pqxx::work& txn) {
    static const SystemClock system_clock;
    const Clock& clock = options_.clock != nullptr ? *options_.clock : system_clock;
    const auto began = clock.monotonic_now();
    txn.commit();
    last_commit_ = clock.monotonic_now() - began;
}

std::vector<JobId> AssignmentStore::enqueue(OrgId org, const std::vector<NewJob>& jobs,
                                            Instant now) {
    std::vector<JobId> ids;
    ids.reserve(jobs.size());
    for (const auto& e : enqueue_each(org, jobs, now)) ids.push_back(e.id);
    return ids;
}

std::vector<Enqueued> AssignmentStore::enqueue_each(OrgId org, const std::vector<NewJob>& jobs,
                                                    Instant now, Duration dedupe_window) {
    const NewJobArrays a = new_job_arrays(jobs);
    pqxx::work txn(*conn_, "enqueue");
    Scope(txn, options_.row_security).to(org);
    // Only a call with exclusions runs the statement that adds them (schema/0025).
    const pqxx::result r =
        a.exclude_n
            ? txn.exec_prepared(sql::kEnqueueExcluding.name, org, now, a.queues, a.payloads,
                                a.priorities, a.run_at_us, a.max_attempts, a.backoff_base_us,
                                a.backoff_cap_us, a.run_timeout_us, a.dedupe_keys, dedupe_window,
                                a.depends_n, a.depends_on, a.on_failure, a.exclude_n,
                                a.exclude_keys, a.exclude_jobs)
            : txn.exec_prepared(sql::kEnqueue.name, org, now, a.queues, a.payloads, a.priorities,
                                a.run_at_us, a.max_attempts, a.backoff_base_us, a.backoff_cap_us,
                                a.run_timeout_us, a.dedupe_keys, dedupe_window, a.depends_n,
                                a.depends_on, a.on_failure);
    txn.commit();
    std::vector<Enqueued> out;
    out.reserve(r.size());
    for (const auto& row : r) {
        out.push_back({row["id"].as<JobId>(), row["created"].as<bool>(), state_of(row["state"])});
    }
    return out;
}

ClaimOutcome AssignmentStore::claim(OrgId org, const ClaimRequest& request, Duration lease,
                                    Instant now) {
    ClaimOutcome out;
    plan_for(static_cast<std::size_t>(request.max_jobs));
    try {
        pqxx::work txn(*conn_, "claim");
        Scope(txn, options_.row_security).to(org);
        const std::string queues = served_queues(request.queues);
        const ClaimVariant variant = begin_claim(txn, org, queues, options_, exclusions_epoch_);
        last_claim_statement_ = single_claim(variant);
        const pqxx::result r = txn.exec_prepared(last_claim_statement_, org, request.worker,
                                                 request.max_jobs, now, lease, queues);
        out.refill_at = refill_after(txn, org, queues, variant.rated, r.size(),
                                     static_cast<std::size_t>(request.max_jobs), now);
        commit(txn);
        for (const auto& row : r) out.leases.push_back(lease_of(row));
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

Transition AssignmentStore::renew(const TransitionRequest& q, Duration lease, Instant now) {
    plan_for(1);
    pqxx::work txn(*conn_, "renew");
    Scope scope(txn, options_.row_security);
    scope.to(q.org);
    const pqxx::result r =
        txn.exec_prepared(sql::kRenew.name, q.org, q.job, q.generation, q.worker, now, lease);
    if (r.empty()) return reject(txn, scope, Operation::Renew, q, now);
    txn.commit();
    Transition t;
    t.state = JobState::Assigned;
    t.lease_expires_at = r[0]["lease_us"].as<Instant>();
    return t;
}

Transition AssignmentStore::progress(const TransitionRequest& q, Instant now) {
    plan_for(1);
    pqxx::work txn(*conn_, "progress");
    Scope scope(txn, options_.row_security);
    scope.to(q.org);
    const pqxx::result r = txn.exec_prepared(sql::kProgress.name, q.org, q.job, q.generation,
                                             q.worker, now, q.percent, q.note, q.checkpoint);
    if (r.empty()) return reject(txn, scope, Operation::Progress, q, now);
    txn.commit();
    Transition t;
    t.state = JobState::Assigned;
    return t;
}

Transition AssignmentStore::park(const TransitionRequest& q, Instant now) {
    plan_for(1);
    pqxx::work txn(*conn_, "park");
    Scope scope(txn, options_.row_security);
    scope.to(q.org);
    const pqxx::result r = txn.exec_prepared(sql::kPark.name, q.org, q.job, q.generation, q.worker,
                                             now, q.park_deadline, q.note, q.token);
    if (r.empty()) return reject(txn, scope, Operation::Park, q, now);
    txn.commit();
    Transition t;
    t.state = JobState::Parked;
    t.lease_expires_at = q.park_deadline;
    return t;
}

Transition AssignmentStore::complete(const TransitionRequest& q, Instant now) {
    plan_for(1);
    pqxx::work txn(*conn_, "complete");
    Scope scope(txn, options_.row_security);
    scope.to(q.org);
    const pqxx::result r = txn.exec_prepared(sql::kComplete.name, q.org, q.job, q.generation,
                                             q.worker, q.result_ref, now);
    if (r.empty()) return reject(txn, scope, Operation::Complete, q, now);
    commit(txn);
    Transition t;
    t.state = JobState::Completed;
    return t;
}

Transition AssignmentStore::fail(const TransitionRequest& q, Instant now) {
    plan_for(1);
    pqxx::work txn(*conn_, "fail");
    Scope scope(txn, options_.row_security);
    scope.to(q.org);
    const pqxx::result r = txn.exec_prepared(sql::kFail.name, q.org, q.job, q.generation, q.worker,
                                             q.reason, q.retryable, now);
    if (r.empty()) return reject(txn, scope, Operation::Fail, q, now);
    txn.commit();
    Transition t;
    t.state = state_of(r[0]["state"]);
    return t;
}

Transition AssignmentStore::release(const TransitionRequest& q, Instant now) {
    plan_for(1);
    pqxx::work txn(*conn_, "release");
    Scope scope(txn, options_.row_security);
    scope.to(q.org);
    const pqxx::result r =
        txn.exec_prepared(sql::kRelease.name, q.org, q.job, q.generation, q.worker, now);
    if (r.empty()) return reject(txn, scope, Operation::Release, q, now);
    txn.commit();
    Transition t;
    t.state = JobState::Pending;
    return t;
}

std::optional<RowAuthority> AssignmentStore::authority(JobId job) {
    pqxx::work txn(*conn_, "authority");
    Scope(txn, options_.row_security).all();
    const auto rows = read_authorities(txn, {job}, false);
    txn.commit();
    return row_of(rows, job);
}

std::vector<ClaimOutcome> AssignmentStore::claim_batch(OrgId org,
                                                       std::span<const ClaimRequest> requests,
                                                       Duration lease, Instant now) {
    std::vector<ClaimOutcome> out;
    plan_for(slots(requests));
    try {
        pqxx::work txn(*conn_, "claim_batch");
        Scope(txn, options_.row_security).to(org);
        out = claim_in(txn, {options_, exclusions_epoch_, last_claim_statement_}, org, requests,
                       lease, now, true, ClaimVariant{});
        commit(txn);
    } catch (const pqxx::sql_error& e) {
        if (e.sqlstate() != kLockNotAvailable) throw;
        out.assign(requests.size(), ClaimOutcome{});
        for (auto& o : out) {
            o.status = options_.lock_strategy == LockStrategy::Wait
                           ? ClaimOutcome::Status::LockTimeout
                           : ClaimOutcome::Status::CandidateLocked;
        }
        return out;
    }
    return out;
}

std::vector<Transition> AssignmentStore::renew_batch(std::span<const TransitionRequest> requests,
                                                     Duration lease, Instant now) {
    std::vector<Transition> out(requests.size());
    std::vector<bool> applied(requests.size(), false);
    plan_for(requests.size());
    pqxx::work txn(*conn_, "renew_batch");
    Scope scope(txn, options_.row_security);
    for (const auto& group : statement_groups(requests, options_.row_security)) {
        scope.to(requests[group.front()].org);
        const TransitionArrays a = arrays_of(requests, group);
        const pqxx::result r = txn.exec_prepared(sql::kRenewBatch.name, a.orgs, a.jobs,
                                                 a.generations, a.workers, now, lease);
        for (const auto& row : r) {
            const auto i = group.at(row["n"].as<std::size_t>() - 1);
            applied.at(i) = true;
            out[i].state = JobState::Assigned;
            out[i].lease_expires_at = row["lease_us"].as<Instant>();
        }
    }
    // A duplicate of an applied request is applied again, as renew() would.
    settle_unapplied(txn, scope, Operation::Renew, requests, applied, now, out,
                     [&](const TransitionRequest& q, Transition& t) {
                         const pqxx::result one = txn.exec_prepared(
                             sql::kRenew.name, q.org, q.job, q.generation, q.worker, now, lease);
                         if (one.empty()) return false;
                         t.state = JobState::Assigned;
                         t.lease_expires_at = one[0]["lease_us"].as<Instant>();
                         return true;
                     });
    txn.commit();
    return out;
}

std::vector<Transition> AssignmentStore::complete_batch(std::span<const TransitionRequest> requests,
                                                        Instant now) {
    plan_for(requests.size());
    pqxx::work txn(*conn_, "complete_batch");
    Scope scope(txn, options_.row_security);
    auto out = complete_in(txn, scope, options_.row_security, requests, now);
    commit(txn);
    return out;
}

std::string AssignmentStore::variant_key(OrgId org, const std::string& queues) {
    // Each organization has its own settings for a queue of a given name.
    return std::to_string(org) + ':' + queues;
}

void AssignmentStore::remember_variant(const std::string& key, unsigned bits) {
    if (claim_variants_.size() >= kClaimVariantsKept && !claim_variants_.contains(key)) {
        // Forget the least recently used half at once: one pass every kClaimVariantsKept / 2
        // new keys.
        std::vector<std::uint64_t> uses;
        uses.reserve(claim_variants_.size());
        for (const auto& entry : claim_variants_) uses.push_back(entry.second.used);
        const auto middle = uses.begin() + static_cast<std::ptrdiff_t>(uses.size() / 2);
        std::nth_element(uses.begin(), middle, uses.end());
        const std::uint64_t cut = *middle;
        std::erase_if(claim_variants_,
                      [cut](const auto& entry) { return entry.second.used < cut; });
    }
    claim_variants_[key] = {bits, ++variant_uses_};
}

CompletedAndClaimed AssignmentStore::complete_and_claim(
    std::span<const TransitionRequest> completions, OrgId org, std::span<const ClaimRequest> claims,
    Duration lease, Instant now) {
    if (options_.lock_strategy != LockStrategy::SkipLocked) {
        throw std::logic_error("complete_and_claim runs under the skip-locked strategy only");
    }
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
    const ClaimVariant variant = begin_claim(txn, org, queues, options_, exclusions_epoch_);
    // What the next mixed transaction of this organization's queues sends with its COMMIT.
    remember_variant(variant_key(org, queues), variant.bits());
    out.completions = complete_in(txn, scope, options_.row_security, completions, now);
    // The completions' scope may have moved to another organization, or to all of them.
    scope.to(org);
    out.claims = claim_in(txn, {options_, exclusions_epoch_, last_claim_statement_}, org, claims,
                          lease, now, false, variant);
    commit(txn);
    return out;
}

std::optional<CompletedAndClaimed> AssignmentStore::complete_and_claim_sent_together(
    std::span<const TransitionRequest> completions, OrgId org, std::span<const ClaimRequest> claims,
    Duration lease, Instant now) {
    const std::string queues = queues_of(claims);
    const std::string key = variant_key(org, queues);
    const auto known = claim_variants_.find(key);
    if (known == claim_variants_.end()) return std::nullopt;
    known->second.used = ++variant_uses_;
    const ClaimVariant expected = ClaimVariant::of_bits(known->second.bits);
    if (!sent_together_ready_) {
        try {
            for (const sql::Statement* statement : kSentTogether) {
                conn_->prepare_now(statement->name);
            }
        } catch (const pqxx::broken_connection&) {
            throw;
        } catch (const pqxx::sql_error&) {
            // A schema older than the guard (schema/0028): statement by statement, as before.
            return std::nullopt;
        }
        sent_together_ready_ = true;
    }
    const ClaimSlots slots = slots_of(claims);
    const char* claim_statement = batch_claim(expected);
    const auto groups = statement_groups(completions, options_.row_security);
    pqxx::result locks;
    pqxx::result claimed;
    std::vector<pqxx::result> completed(groups.size());
    {
        pqxx::nontransaction session(*conn_, "complete_and_claim");
        try {
            // BEGIN, every statement and COMMIT in one message (pqxx::pipeline: one simple
            // query). A statement that fails leaves the transaction aborted and the rest of the
            // message, COMMIT included, unrun; so does the claim's locks finding that the served
            // queues now call for another claim statement (kClaimLocksExpecting).
            pqxx::pipeline batch(session, "complete_and_claim");
            batch.retain(static_cast<int>(2 * groups.size() + 8));
            std::string scoped;
            const auto scope_to = [&](OrgId o) {
                if (!options_.row_security || scoped == std::to_string(o)) return;
                scoped = std::to_string(o);
                batch.insert(execute_text(session, sql::kScope.name, {scoped}));
            };
            batch.insert("BEGIN");
            // In the order complete_and_claim runs them: the claim's locks first.
            scope_to(org);
            const auto locks_id = batch.insert(execute_text(
                session, sql::kClaimLocksExpecting.name,
                {std::to_string(org), queues, std::to_string(expected.bits()),
                 // Before any claim on this session, 0: as variant_of, any flag moved it.
                 std::to_string(exclusions_epoch_.value_or(0))}));
            std::vector<pqxx::pipeline::query_id> completed_ids;
            for (const auto& group : groups) {
                scope_to(completions[group.front()].org);
                const TransitionArrays a = arrays_of(completions, group);
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
            batch.insert("COMMIT");
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
            // first, and queues whose claim statement changed are looked up again.
            roll_back(session);
            if (e.sqlstate() == kNoSuchStatement) sent_together_ready_ = false;
            if (e.sqlstate() == kClaimVariantChanged) claim_variants_.erase(key);
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
    variant_of(locks[0], exclusions_epoch_);
    last_claim_statement_ = claim_statement;
    CompletedAndClaimed out;
    out.completions.resize(completions.size());
    std::vector<bool> applied(completions.size(), false);
    // The claim that followed may have taken a refused completion's job again: each refusal is
    // decided on the row its statement locked, not on the row as the claim left it.
    std::vector<std::optional<RowAuthority>> seen(completions.size());
    for (std::size_t g = 0; g < groups.size(); ++g) {
        mark_completed(completed[g], groups[g], applied, out.completions, &seen);
    }
    const bool short_of_rate = expected.rated && claimed.size() < slots.owner.size();
    std::optional<Instant> refill;
    if (short_of_rate || std::find(applied.begin(), applied.end(), false) != applied.end()) {
        try {
            pqxx::work txn(*conn_, "complete_and_claim_settle");
            Scope scope(txn, options_.row_security);
            settle_completions(txn, scope, completions, applied, now, out.completions, seen);
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
    out.claims = claim_outcomes(claimed, slots, claims, refill);
    return out;
}

std::vector<Reclaimed> AssignmentStore::reclaim_expired(Instant now, int limit) {
    return reclaim_with(sql::kReclaim, "reclaim", now, limit);
}

std::vector<Reclaimed> AssignmentStore::expire_parks(Instant now, int limit) {
    return reclaim_with(sql::kExpireParks, "expire_parks", now, limit);
}

std::vector<Reclaimed> AssignmentStore::reclaim_with(const sql::Statement& statement,
                                                     const char* name, Instant now, int limit) {
    pqxx::work txn(*conn_, name);
    Scope(txn, options_.row_security).all();
    const pqxx::result r = txn.exec_prepared(statement.name, now, limit);
    txn.commit();
    std::vector<Reclaimed> out;
    out.reserve(r.size());
    for (const auto& row : r) {
        Reclaimed rc;
        rc.job_id = row["id"].as<JobId>();
        rc.org_id = row["org_id"].as<OrgId>();
        rc.generation = row["generation"].as<Generation>();
        rc.assignee = row["assignee"].is_null() ? "" : row["assignee"].as<std::string>();
        rc.state = state_of(row["state"]);
        out.push_back(std::move(rc));
    }
    return out;
}

int AssignmentStore::promote_due(Instant now, int limit) {
    pqxx::work txn(*conn_, "promote_due");
    Scope(txn, options_.row_security).all();
    const pqxx::row r = txn.exec_prepared1(sql::kPromoteDue.name, now, limit);
    txn.commit();
    return r["promoted"].as<int>();
}

std::optional<Instant> AssignmentStore::next_due() {
    pqxx::work txn(*conn_, "next_due");
    Scope(txn, options_.row_security).all();
    const pqxx::row r = txn.exec_prepared1(sql::kNextDue.name);
    txn.commit();
    if (r["run_at_us"].is_null()) return std::nullopt;
    return r["run_at_us"].as<Instant>();
}

bool AssignmentStore::try_retention_lock() {
    pqxx::nontransaction session(*conn_);
    return session.exec_prepared1(sql::kRetentionTryLock.name)["held"].as<bool>();
}

void AssignmentStore::release_retention_lock() {
    pqxx::nontransaction session(*conn_);
    session.exec_prepared(sql::kRetentionUnlock.name);
}

std::vector<Pruned> AssignmentStore::prune_finished(Instant now, int limit) {
    pqxx::work txn(*conn_, "prune_finished");
    Scope(txn, options_.row_security).all();
    std::vector<Pruned> out;
    for (const auto& r : txn.exec_prepared(sql::kPruneJobs.name, now, limit)) {
        Pruned p;
        p.org_id = r["org_id"].as<OrgId>();
        p.completed = r["completed"].as<std::int64_t>();
        p.failed = r["failed"].as<std::int64_t>();
        p.discarded = r["discarded"].as<std::int64_t>();
        p.cancelled = r["cancelled"].as<std::int64_t>();
        p.results = r["results"].as<std::int64_t>();
        out.push_back(p);
    }
    txn.commit();
    return out;
}

std::vector<std::string> AssignmentStore::ensure_event_partitions(Instant now, int months_ahead) {
    pqxx::work txn(*conn_, "ensure_event_partitions");
    Scope(txn, options_.row_security).all();
    std::vector<std::string> out;
    for (const auto& r : txn.exec_prepared(sql::kEnsurePartitions.name, now, months_ahead)) {
        out.push_back(r["name"].as<std::string>());
    }
    txn.commit();
    return out;
}

PartitionSummary AssignmentStore::partition_summary() {
    pqxx::work txn(*conn_, "partition_summary");
    Scope(txn, options_.row_security).all();
    const pqxx::row r = txn.exec_prepared1(sql::kPartitionSummary.name);
    txn.commit();
    PartitionSummary s;
    s.attached = r["attached"].as<std::int64_t>();
    s.detaching = r["detaching"].as<std::int64_t>();
    s.archived = r["archived"].as<std::int64_t>();
    s.dropped = r["dropped"].as<std::int64_t>();
    if (!r["covered_until_us"].is_null()) s.covered_until = r["covered_until_us"].as<Instant>();
    return s;
}

}  // namespace aclaim::common
