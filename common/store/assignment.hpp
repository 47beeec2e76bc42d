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

namespace aclaim::common {

using JobId = std::int64_t;
using OrgId = std::int64_t;
using Generation = std::int64_t;

enum class JobState { Pending, Assigned, Completed, Failed, Quarantined };

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
    Instant at{};
    std::string detail;
};

/// What a claim does when the head candidate row is locked by another transaction.
enum class LockStrategy {
    SkipLocked,  ///< pass over locked rows and take the next eligible one (default)
    NoWait,      ///< fail at once with CandidateLocked
    Wait,        ///< wait for the lock, bounded by lock_timeout, then LockTimeout
};

std::string_view to_string(LockStrategy s);
std::optional<LockStrategy> parse_lock_strategy(std::string_view s);

/// Why a renew, complete, fail or release was refused. Nothing changed in the row.
enum class Rejection {
    UnknownJob,         ///< no such job
    OtherOrganization,  ///< the job belongs to another organization
    StaleGeneration,    ///< the job was claimed again since this generation was granted
    LeaseExpired,       ///< the lease ran out (and the job may already be reclaimed)
    AlreadyTerminal,    ///< the job is completed or failed
    NotAssignee,        ///< the generation matches but another worker holds it
    Quarantined,        ///< the recovery tool set the job aside for review
};

std::string_view to_string(Rejection r);
std::optional<Rejection> parse_rejection(std::string_view s);

/// A job to add to the queue.
struct NewJob {
    int priority = 0;
    std::string payload;
    int max_attempts = 3;
};

/// One requester of a claim, alone or coalesced with others of its organization.
struct ClaimRequest {
    std::string worker{};
    int max_jobs = 1;
};

/// One renew, complete, fail or release, alone or coalesced: the fence it names (organization,
/// job, generation, worker) and the fields of the operations that carry more.
/// Every member has an initializer, so a call may name only the fields its operation uses.
struct TransitionRequest {
    OrgId org = 0;
    JobId job = 0;
    Generation generation = 0;
    std::string worker{};
    std::string result_ref{};  ///< complete only
    std::string reason{};      ///< fail only
    bool retryable = false;    ///< fail only
};

/// A granted lease: the job, its fencing generation and the lease deadline.
struct Lease {
    JobId job_id = 0;
    OrgId org_id = 0;
    Generation generation = 0;
    int priority = 0;
    Instant enqueued_at{};
    Instant lease_expires_at{};
    int attempts = 0;
    int max_attempts = 0;
    std::string payload;
};

struct ClaimOutcome {
    enum class Status {
        Claimed,          ///< leases holds at least one job
        NoWork,           ///< nothing eligible (or every candidate was locked, under skip_locked)
        CandidateLocked,  ///< nowait: a candidate row was locked by another transaction
        LockTimeout,      ///< wait: lock_timeout elapsed while waiting on a candidate row
    };
    Status status = Status::NoWork;
    std::vector<Lease> leases;
};

std::string_view to_string(ClaimOutcome::Status s);

/// The outcome of renew, complete, fail and release.
struct Transition {
    std::optional<Rejection> rejection;  ///< empty when the transition was applied
    bool replayed = false;       ///< the same request had already been applied; nothing changed now
    std::string detail;          ///< human-readable explanation of a rejection
    Instant lease_expires_at{};  ///< renew: the new deadline
    JobState state = JobState::Pending;  ///< the row's state afterwards, when applied

    bool accepted() const { return !rejection.has_value(); }
};

/// A lease taken back by the reaper or the recovery tool.
struct Reclaimed {
    JobId job_id = 0;
    OrgId org_id = 0;
    Generation generation = 0;           ///< the generation that lost its authority
    std::string assignee;                ///< the worker that held it
    JobState state = JobState::Pending;  ///< pending, or failed past max_attempts
};

/// The fields of the current row that decide why a request was refused.
struct RowAuthority {
    OrgId org_id = 0;
    JobState state = JobState::Pending;
    Generation generation = 0;
    std::string assignee;
    std::optional<Instant> lease_expires_at;
    std::string result_ref;
};

enum class Operation { Renew, Complete, Fail, Release };

/// Decides the rejection for a request whose fenced update matched no row, from the current row
/// (or its absence). Returns nullopt when the row shows the request was already applied, so that
/// a worker re-sending after a lost reply gets the truth instead of a spurious rejection.
std::optional<Rejection> diagnose(const std::optional<RowAuthority>& row, Operation op,
                                  const TransitionRequest& request, Instant now,
                                  std::string* detail);

}  // namespace aclaim::common
