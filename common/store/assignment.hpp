#pragma once

// The assignment contract's vocabulary: states, lock strategies and typed outcomes.
// Expected outcomes (no work, stale, lease lost) are values; only failures that end a request
// (the database went away) are exceptions.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/clock.hpp"
#include "common/base/queue_name.hpp"

namespace aclaim::store {

using JobId = std::int64_t;
using OrgId = std::int64_t;
using Generation = std::int64_t;

/// pending: claimable now. scheduled: waiting for its run_at (a delay, or a retry's backoff).
/// assigned: leased. completed, failed (a final failure), discarded (every attempt used up) and
/// cancelled are terminal. quarantined: set aside by the recovery tool for a person. parked: its
/// holder handed it to an outside system (protocol 1.6), which finishes it with a callback token
/// until the park's deadline; not terminal, cancellable. New states go at the end (display order
/// is kJobStates').
enum class JobState {
    Pending,
    Scheduled,
    Assigned,
    Completed,
    Failed,
    Discarded,
    Cancelled,
    Quarantined,
    Parked,
    /// Enqueued with dependencies not all ended (schema/baseline/tables.sql): never claimed until
    /// the last one ends, in the transaction that ends it.
    Waiting
};

/// True for the states a job never leaves on its own (an operator may revive failed, discarded
/// and cancelled jobs with `aclaimctl retry`).
bool is_terminal(JobState s);

std::string_view to_string(JobState s);
std::optional<JobState> parse_job_state(std::string_view s);

/// One row of job_events, the append-only audit log: what the checker reads in bulk, what the
/// recovery tool quotes as evidence and what `aclaimctl inspect` prints.
struct AuditEvent {
    std::int64_t id = 0;  ///< log order
    JobId job_id = 0;
    OrgId org_id = 0;
    Generation generation = 0;
    std::string kind;
    std::string worker;
    base::Instant at{};
    std::string detail;
};

/// Why a renew, complete, fail or release was refused. Nothing changed in the row.
enum class Rejection {
    UnknownJob,         ///< no such job
    OtherOrganization,  ///< the job belongs to another organization
    StaleGeneration,    ///< the job was claimed again since this generation was granted
    LeaseExpired,       ///< the lease ran out (and the job may already be reclaimed)
    AlreadyTerminal,    ///< the job is completed or failed
    NotAssignee,        ///< the generation matches but another worker holds it
    Quarantined,        ///< the recovery tool set the job aside for review
    DeadlineExceeded,   ///< the attempt ran into its run deadline; the retry policy applies
    Cancelled,          ///< an operator or producer cancelled the job
};

std::string_view to_string(Rejection r);
std::optional<Rejection> parse_rejection(std::string_view s);

/// A job to add. Unset options take the queue's setting (job_queues), then the built-in default
/// (3 attempts, no backoff: a retry is claimable at once, no run deadline).
/// What a dependency that fails, is discarded or is cancelled does to the jobs waiting for it:
/// cancel them (and theirs in turn), or count it as done and run them anyway.
enum class DependencyPolicy { Cancel, Run };

struct NewJob {
    int priority = 0;
    std::string payload;
    std::optional<int> max_attempts{};
    std::string queue{base::kDefaultQueue};
    /// Not claimable before this instant (the job is scheduled until then).
    std::optional<base::Instant> run_at{};
    std::optional<base::Duration> backoff_base{};
    std::optional<base::Duration> backoff_cap{};
    /// How long one attempt may run, renewals included.
    std::optional<base::Duration> run_timeout{};
    /// While a job of the organization holds this key, enqueueing it again returns that job.
    std::optional<std::string> dedupe_key{};
    /// The jobs this one waits for (schema/baseline/tables.sql), of the same organization:
    /// a job id, or job_of_this_call(k) for job k of the same enqueue. Empty: claimable at once.
    std::vector<JobId> depends_on{};
    /// What a dependency that ends other than completed does to this job.
    DependencyPolicy on_failure = DependencyPolicy::Cancel;
    /// Separation of duties (schema/baseline/tables.sql): the reviewers (key names) never to
    /// hand this job to. Empty, with exclude_completers_of: any reviewer.
    std::vector<std::string> exclude_keys{};
    /// The jobs whose completer never gets this job (a job id, or job_of_this_call(k)); while one
    /// of them has not ended, nobody gets it.
    std::vector<JobId> exclude_completers_of{};
};

/// The reference, in NewJob::depends_on, to job k (counting from 1) of the same enqueue call.
constexpr JobId job_of_this_call(int k) {
    return -static_cast<JobId>(k);
}

/// What enqueue did with one NewJob.
struct Enqueued {
    JobId id = 0;
    bool created = true;  ///< false: a job holding the dedupe key was returned instead
    JobState state = JobState::Pending;
};

/// One requester of a claim, alone or coalesced with others of its organization that serve the
/// same queues.
struct ClaimRequest {
    std::string worker{};
    int max_jobs = 1;
    /// The queues served; empty means kDefaultQueue only.
    std::vector<std::string> queues{};
};

/// One renew, complete, fail or release, alone or coalesced: the fence it names (organization,
/// job, generation, worker) and the fields of the operations that carry more.
/// Every member has an initializer, so a call may name only the fields its operation uses.
struct TransitionRequest {
    OrgId org = 0;
    JobId job = 0;
    Generation generation = 0;
    std::string worker{};
    std::string result_ref{};       ///< complete only
    std::string reason{};           ///< fail only
    bool retryable = false;         ///< fail only
    int percent = 0;                ///< progress only: 0..100
    std::string note{};             ///< progress only
    std::string checkpoint{};       ///< progress only; empty keeps the stored checkpoint
    base::Instant park_deadline{};  ///< park only: when the park ends (the retry policy applies)
    std::string token{};            ///< park only: the callback token, 64 hex digits; stored hashed
};

/// The last progress reported on a job (schema/baseline/tables.sql): what its next holder resumes
/// from.
struct SavedProgress {
    Generation generation = 0;  ///< the generation that reported it
    int percent = 0;
    std::string note;
    std::string checkpoint;
};

/// A granted lease: the job, its fencing generation and the lease deadline.
struct Lease {
    JobId job_id = 0;
    OrgId org_id = 0;
    Generation generation = 0;
    int priority = 0;
    base::Instant enqueued_at{};
    base::Instant lease_expires_at{};
    int attempts = 0;
    int max_attempts = 0;
    std::string payload;
    std::string queue;
    /// The attempt's run deadline, when the job has one: the lease never runs past it.
    std::optional<base::Instant> deadline{};
    /// The progress an earlier holder reported, when one did.
    std::optional<SavedProgress> resume{};
};

struct ClaimOutcome {
    enum class Status {
        Claimed,  ///< leases holds at least one job
        NoWork,   ///< nothing eligible, or every candidate locked by another transaction
    };
    Status status = Status::NoWork;
    std::vector<Lease> leases;
    /// When the claim came back short while a served queue with pending jobs had an empty rate
    /// limit bucket: the first instant one of those buckets holds a token again, at which a
    /// parked claim is worth trying again. Not computed for queues without a rate.
    std::optional<base::Instant> refill_at;
    /// The claim came back short while a served queue has a concurrency limit (max_assigned): a
    /// slot that frees on one of its queues is worth trying again for. Set whether or not the
    /// limit is what held it back; never for a claim whose queues have no limit.
    bool slot_bound = false;
};

std::string_view to_string(ClaimOutcome::Status s);

/// The outcome of renew, complete, fail and release.
struct Transition {
    std::optional<Rejection> rejection;  ///< empty when the transition was applied
    bool replayed = false;  ///< the same request had already been applied; nothing changed now
    std::string detail;     ///< human-readable explanation of a rejection
    base::Instant lease_expires_at{};    ///< renew: the new deadline; park: the park's deadline
    JobState state = JobState::Pending;  ///< the row's state afterwards, when applied
    /// Complete, fail, release and park, applied now: the job's queue, where the job no longer
    /// holds a lease (a slot of its concurrency limit; a park that extends an earlier park freed
    /// none, and costs a waiting claim one look). Empty for the others, and for a replay.
    std::string queue;

    bool accepted() const { return !rejection.has_value(); }
};

/// A lease taken back by the reaper or the recovery tool.
struct Reclaimed {
    JobId job_id = 0;
    OrgId org_id = 0;
    Generation generation = 0;           ///< the generation that lost its authority
    std::string assignee;                ///< the worker that held it
    std::string queue;                   ///< the job's queue (the reaper's reclaims)
    JobState state = JobState::Pending;  ///< pending or scheduled, or discarded past max_attempts
    /// The REVOKED reason pushed to the holder: "reclaimed" (the reaper), or "cancelled".
    std::string reason = "reclaimed";
};

/// What one prune batch removed from one organization (schema/baseline/tables.sql): finished jobs
/// by state, and their published results.
struct Pruned {
    OrgId org_id = 0;
    std::int64_t completed = 0, failed = 0, discarded = 0, cancelled = 0;
    std::int64_t results = 0;
    std::int64_t jobs() const { return completed + failed + discarded + cancelled; }
};

/// job_events' partitions by what became of them, and how far ahead the attached ones reach.
struct PartitionSummary {
    std::int64_t attached = 0, detaching = 0, archived = 0, dropped = 0;
    std::optional<base::Instant> covered_until;
};

/// The fields of the current row that decide why a request was refused.
struct RowAuthority {
    OrgId org_id = 0;
    JobState state = JobState::Pending;
    Generation generation = 0;
    std::string assignee;
    std::optional<base::Instant> lease_expires_at;
    std::optional<base::Instant> deadline;
    std::string result_ref;
};

enum class Operation { Renew, Complete, Fail, Release, Progress, Park };

/// Decides the rejection for a request whose fenced update matched no row, from the current row
/// (or its absence). Returns nullopt when the row shows the request was already applied, so that
/// a worker re-sending after a lost reply gets the truth instead of a spurious rejection.
std::optional<Rejection> diagnose(const std::optional<RowAuthority>& row, Operation op,
                                  const TransitionRequest& request, base::Instant now,
                                  std::string* detail);

}  // namespace aclaim::store
