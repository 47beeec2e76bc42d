#pragma once

#include <bitset>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/store/assignment.hpp"
#include "common/store/claim_plan.hpp"

namespace aclaim::store {

namespace sql {
struct Statement;
}

/// Settings of one store connection.
struct StoreOptions {
    /// Name reported in pg_stat_activity.application_name.
    std::string application_name = "aclaim";
    /// Act as the aclaim_coordinator role, under row-level security: each transaction names its
    /// organization in aclaim.org_id, so a statement that forgot its org_id filter still sees
    /// and changes only that organization's rows. The login role must be a member of
    /// aclaim_coordinator (or a superuser). Work across organizations (reclaiming expired leases,
    /// reading a row's authority) names every organization explicitly.
    bool row_security = false;
    /// Times the commits that last_commit() reports; the system clock when not given. It must
    /// outlive the store.
    const base::Clock* clock = nullptr;
    /// A transaction for fewer jobs than this runs its statements on their generic plans
    /// (plan_cache_mode): planning a claim or a completion for its parameters costs more than
    /// a few jobs' worth of work, while a large batch earns the plan made for its arrays. 0:
    /// PostgreSQL chooses, as it does by default.
    std::size_t generic_plans_below = 0;
};

/// Switches a session to the row-security role (kRowSecurityRole). Throws std::runtime_error
/// naming the role and the remedy when the login cannot act as it; a connection failure
/// (pqxx::broken_connection) passes through unchanged.
void act_as_row_security_role(pqxx::connection& conn);

/// A row that counts pruned jobs by outcome (kPruneJobs, the retention ledger): org_id,
/// completed, failed, discarded, cancelled, results.
Pruned pruned_of(const pqxx::row& r);

/// What complete_and_claim answers: one outcome per completion and per claim, in order.
struct CompletedAndClaimed {
    std::vector<Transition> completions;
    std::vector<ClaimOutcome> claims;
};

/// The explicit state methods of the assignment contract, over one PostgreSQL connection.
/// Each method is one transaction; the transition itself is one SQL statement that re-checks the
/// row's current authority. Time always comes from the caller. Not thread-safe: one store per
/// thread, as a libpqxx connection is one thread's world.
class AssignmentStore {
  public:
    AssignmentStore(const std::string& dsn, StoreOptions options = {});
    ~AssignmentStore();
    AssignmentStore(const AssignmentStore&) = delete;
    AssignmentStore& operator=(const AssignmentStore&) = delete;

    const StoreOptions& options() const { return options_; }
    bool is_open() const;

    /// Adds jobs, all with enqueued_at = now: pending, or scheduled when run_at is later. Returns
    /// their ids in order (for a held dedupe key, the id of the job that holds it).
    std::vector<JobId> enqueue(OrgId org, const std::vector<NewJob>& jobs, base::Instant now);
    /// As enqueue, saying for each job whether it was created or an existing holder of its
    /// dedupe key; a key held by a job that finished less than dedupe_window ago is still held.
    std::vector<Enqueued> enqueue_each(OrgId org, const std::vector<NewJob>& jobs,
                                       base::Instant now,
                                       base::Duration dedupe_window = base::Duration{0});

    /// Moves up to max_jobs of the organization's best pending jobs, from the queues the request
    /// serves that are not paused and within their concurrency limits, to assigned, in one
    /// statement after the queue locks (kClaimLocks).
    ClaimOutcome claim(OrgId org, const ClaimRequest& request, base::Duration lease,
                       base::Instant now);

    /// Extends a live lease of the current generation to now + lease.
    Transition renew(const TransitionRequest& request, base::Duration lease, base::Instant now);

    /// Records how far the holder of a live lease of the current generation is (its percent,
    /// note and, when not empty, checkpoint) in job_progress, audited 'checkpoint' when it
    /// carries one. Refused and audited as a completion of the same generation would be. The
    /// lease is not extended.
    Transition progress(const TransitionRequest& request, base::Instant now);

    /// Parks a job held under a live lease of the current generation (protocol 1.6): it waits,
    /// parked, for an outside system's callback with request.token (stored hashed) until
    /// request.park_deadline, audited 'parked'. A re-sent PARK of the same generation and holder
    /// before the deadline parks it again under the re-sent token. Refused and audited as a
    /// completion of the same generation would be.
    Transition park(const TransitionRequest& request, base::Instant now);

    /// Completes a job held under a live lease of the current generation and publishes its result
    /// in the same transaction.
    Transition complete(const TransitionRequest& request, base::Instant now);

    /// Fails a job; a retryable failure with attempts left returns it to pending instead.
    Transition fail(const TransitionRequest& request, base::Instant now);

    /// Returns a held job to pending without counting the attempt.
    Transition release(const TransitionRequest& request, base::Instant now);

    /// Coalesced claim: one LIMIT (sum of max_jobs) statement for the organization and the queues
    /// the first request serves (the caller batches only requests that serve the same), its leases
    /// handed out to the requesters in order, best jobs first. One outcome per request, in order.
    std::vector<ClaimOutcome> claim_batch(OrgId org, std::span<const ClaimRequest> requests,
                                          base::Duration lease, base::Instant now);

    /// Coalesced renew: one statement over arrays in one transaction. Requests it did not apply
    /// take the single statement and its diagnosis in the same transaction, so each outcome is
    /// exactly what renew() would have answered. One outcome per request, in order.
    std::vector<Transition> renew_batch(std::span<const TransitionRequest> requests,
                                        base::Duration lease, base::Instant now);

    /// Coalesced complete, as renew_batch: outbox rows, events and notifications in the same
    /// statement, rejections diagnosed and audited as complete() does.
    std::vector<Transition> complete_batch(std::span<const TransitionRequest> requests,
                                           base::Instant now);

    /// A DB thread's mixed batch: completions (any organizations, as complete_batch) and one
    /// organization's claims (as claim_batch: one set of queues), in one transaction with one
    /// commit. The completions go first, so the room they free in a limited queue is the claims'.
    /// Each request is still fenced on its own row and answered on its own, exactly as the two
    /// batch calls would answer it. Under the skip-locked strategy only: a lock failure of the
    /// claim under the others would roll the completions back with it.
    CompletedAndClaimed complete_and_claim(std::span<const TransitionRequest> completions,
                                           OrgId org, std::span<const ClaimRequest> claims,
                                           base::Duration lease, base::Instant now);

    /// Takes back up to limit leases that expired at now, across organizations, each decided on
    /// the current locked row. Past max_attempts the job fails instead.
    std::vector<Reclaimed> reclaim_expired(base::Instant now, int limit);

    /// Ends up to limit parks whose deadline passed at now, across organizations, as failed
    /// attempts: the retry policy applies (schema/baseline/tables.sql). Nobody holds a lease to
    /// revoke; each is returned for the log and the count.
    std::vector<Reclaimed> expire_parks(base::Instant now, int limit);

    /// Makes up to limit scheduled jobs whose run_at has arrived pending, across organizations,
    /// and wakes their queues. Returns how many.
    int promote_due(base::Instant now, int limit);
    /// The earliest run_at of any scheduled job.
    std::optional<base::Instant> next_due();

    /// Takes the retention lock (a session advisory lock) if no other session holds it; true when
    /// this session holds it now. Released by release_retention_lock or when the session ends.
    bool try_retention_lock();
    void release_retention_lock();
    /// One prune batch: removes up to limit finished jobs whose retention has passed at now (the
    /// predicate aclaim_job_prunable decides), with their results, recorded in job_prunes. One
    /// entry per organization touched.
    std::vector<Pruned> prune_finished(base::Instant now, int limit);
    /// Creates the monthly partitions of job_events from now's month through months_ahead months
    /// after it that do not exist yet; returns their names.
    std::vector<std::string> ensure_event_partitions(base::Instant now, int months_ahead);
    PartitionSummary partition_summary();

    /// The row's current authority (organization, state, generation, assignee, lease), read
    /// without locking: used to learn the truth after a commit whose outcome was unknown.
    std::optional<RowAuthority> authority(JobId job);

    /// The connection, for administrative queries on the same session.
    pqxx::connection& connection();

    /// The name of `plan`'s claim statement (sql::claim_statement), registered on this connection
    /// the first time a claim needs it (and prepared on the server when it first runs); for
    /// running a claim's statement in a caller's own transaction, after kClaimLocks.
    const char* prepare_claim(const ClaimPlan& plan);

    /// How long the COMMIT of the last claim, claim_batch, complete or complete_batch took: the
    /// wait for the WAL flush, mostly. Zero after a complete_and_claim sent in one message, whose
    /// COMMIT is not timed apart from its statements.
    std::chrono::steady_clock::duration last_commit() const { return last_commit_; }
    /// The name of the claim statement the last claim ran (sql::claim_statement of a ClaimPlan):
    /// which plan the served queues chose, for tests and diagnostics.
    const char* last_claim_statement() const { return last_claim_statement_; }
    /// How many complete_and_claim transactions went in one round trip, their statements and
    /// COMMIT sent together (the rest ran statement by statement).
    std::uint64_t sent_together() const { return sent_together_; }

  private:
    void commit(pqxx::work& txn);
    /// complete_and_claim in one round trip (docs/performance.md, "One message for the whole
    /// transaction"): BEGIN, the scope, the claim's locks, the completions, the claim and COMMIT
    /// sent together, the locks refusing (kClaimLocksExpecting) when the served queues call for
    /// another claim plan than the one sent. Completions the batch did not apply, and a rated
    /// claim's refill, are settled after, in a transaction of their own. None when these queues
    /// have no known claim plan yet, or when the batch could not be used as sent (rolled back;
    /// the caller runs the transaction statement by statement).
    std::optional<CompletedAndClaimed> complete_and_claim_sent_together(
        std::span<const TransitionRequest> completions, OrgId org,
        std::span<const ClaimRequest> claims, base::Duration lease, base::Instant now);
    static std::string plan_key(OrgId org, const std::string& queues);
    /// Records the dimensions of a claim plan, forgetting the least recently used half past
    /// kClaimPlansKept.
    void remember_plan(const std::string& key, unsigned bits);
    /// A coalesced claim's statement in `txn`, which is scoped to org: after the claim's locks,
    /// taken here, or with `known`, the plan the caller's locks found.
    std::vector<ClaimOutcome> claim_in(pqxx::work& txn, OrgId org,
                                       std::span<const ClaimRequest> requests, base::Duration lease,
                                       base::Instant now, const ClaimPlan* known);
    /// The one runner of renew, progress, park, complete, fail and release: in one transaction
    /// scoped to the request's organization, the fenced statement of `op` with `args` (which
    /// fences on the row, applies and audits); a refusal diagnosed on the row and audited
    /// (settle_unapplied); the commit; and the answer `applied` reads from the applied row.
    template <class Applied, class... Args>
    Transition fenced(Operation op, const TransitionRequest& request, base::Instant now,
                      Applied applied, const Args&... args);
    /// reclaim_expired and expire_parks: one reclaim_statement, across organizations.
    std::vector<Reclaimed> reclaim_with(const sql::Statement& statement, const char* name,
                                        base::Instant now, int limit);
    /// Before a transaction for `jobs` jobs: generic plans or the planner's choice, as
    /// StoreOptions::generic_plans_below says; a round trip only when the choice changes.
    void plan_for(std::size_t jobs);
    bool generic_plans_ = false;

    StoreOptions options_;
    std::chrono::steady_clock::duration last_commit_{};
    /// The exclusions epoch the last claim read (kClaimLocks); none before the first, which runs
    /// the exclusion-aware statement unless no queue was ever flagged.
    std::optional<std::int64_t> exclusions_epoch_;
    /// Whether the last claim's locks found a served queue with a concurrency limit.
    bool claim_capped_ = false;
    const char* last_claim_statement_ = "";
    /// The claim plan's dimensions (ClaimPlan::dimension_bits) the last claim of each
    /// organization's set of served queues ran (plan_key), which the next mixed transaction of
    /// the same organization and queues sends with its COMMIT; `used` orders the entries for
    /// forgetting the least recently used (remember_plan).
    struct KnownPlan {
        unsigned bits = 0;
        std::uint64_t used = 0;
    };
    std::unordered_map<std::string, KnownPlan> claim_plans_;
    std::uint64_t plan_uses_ = 0;
    /// The claim plans registered on this connection, by ClaimPlan::index.
    std::bitset<kClaimPlanCount> claim_plans_registered_;
    /// Whether the statements sent together are prepared on this session (pqxx prepares on
    /// first use; an EXECUTE needs them already there).
    bool sent_together_ready_ = false;
    std::uint64_t sent_together_ = 0;
    std::unique_ptr<pqxx::connection> conn_;
};

}  // namespace aclaim::store
