#pragma once

#include <map>
#include <optional>
#include <pqxx/pqxx>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/ops/job_record.hpp"
#include "common/store/assignment.hpp"

namespace aclaim::ops {

/// One organization's queue as an operator sees it at an instant.
struct OrgStatus {
    store::OrgId org_id = 0;
    std::int64_t pending = 0;
    std::int64_t scheduled = 0;
    std::int64_t assigned = 0;
    std::int64_t completed = 0;
    std::int64_t failed = 0;
    std::int64_t discarded = 0;
    std::int64_t cancelled = 0;
    std::int64_t quarantined = 0;
    std::int64_t parked = 0;          ///< handed to an outside system (protocol 1.6)
    std::int64_t waiting = 0;         ///< enqueued with dependencies not all ended
    std::int64_t live_leases = 0;     ///< assigned, lease still running
    std::int64_t expired_leases = 0;  ///< assigned, lease over, not yet reclaimed
    std::int64_t completed_last_minute = 0;
    std::optional<base::Duration> oldest_pending_age;  ///< now minus the oldest pending enqueued_at
    /// The count of state `s`.
    std::int64_t count(store::JobState s) const;
};

/// A job's saved progress as an operator sees it (schema/baseline/tables.sql).
struct ProgressRecord {
    store::Generation generation = 0;  ///< the generation that reported it
    int percent = 0;
    std::string note;
    std::size_t checkpoint_bytes = 0;
    base::Instant updated_at{};
};

/// A job's latest park as an operator sees it (protocol 1.6, schema/baseline/tables.sql).
struct ParkRecord {
    store::Generation generation = 0;  ///< the generation that parked it
    std::string parked_by;
    std::string note;
    base::Instant parked_at{};
    base::Instant deadline{};
    std::optional<base::Instant> used_at;  ///< when the callback finished it
    std::string used_by;
    std::string outcome;  ///< completed, failed or retry; empty while unused
};

/// One edge of a job's dependencies as an operator sees it (schema/baseline/tables.sql):
/// the job at its other end, the edge's policy, how that dependency ended and the job's state now.
struct DependencyRecord {
    store::JobId job = 0;
    std::string policy;                   ///< cancel or run, when the dependency does not complete
    std::optional<std::string> resolved;  ///< how the dependency ended; none: not yet
    std::optional<std::string> state;     ///< the other job's state; none: pruned by retention
};

/// One of a job's exclusions (schema/baseline/tables.sql): a reviewer named, or a job whose
/// completer may not take this one, with that job's state and, once it completed, its completer.
struct ExclusionRecord {
    std::optional<std::string> reviewer;
    std::optional<store::JobId> completer_of;
    std::optional<std::string> named_state;
    std::optional<std::string> completer;
};

/// What ties a job to others: what it waits for, what waits for it, whom it excludes.
struct JobLinks {
    std::vector<DependencyRecord> depends_on;  ///< at most kEdgesShown
    std::vector<DependencyRecord> dependents;  ///< at most kEdgesShown
    bool more_depends_on = false;              ///< past kEdgesShown
    bool more_dependents = false;
    std::vector<ExclusionRecord> exclusions;
    static constexpr int kEdgesShown = 100;
};

/// The job's exclusions, on the caller's transaction (the console reads them under its scope).
std::vector<ExclusionRecord> read_exclusions(pqxx::transaction_base& txn, store::JobId id);

/// Which jobs `jobs list` and the console's jobs page show; every filter is optional. Pages go by
/// id.
struct JobFilter {
    std::optional<store::OrgId> org_id;
    std::optional<std::string> queue;
    std::optional<std::string> state;
    std::optional<std::string> assignee;
    std::optional<base::Instant> enqueued_before;
    store::JobId after_id = 0;
    int limit = 50;
};

/// What an operator's release or fail of an assignment did.
struct OperatorOutcome {
    enum class Result {
        Done,         ///< applied; `job` is the row afterwards
        NotFound,     ///< no such job
        NotAssigned,  ///< nothing holds the job; `job` is the row as it is
        Moved,        ///< the job is held at another generation than the operator named, or was
                      ///< claimed again while we looked; `job` is the row as it is
        Busy,         ///< a coordinator kept the row locked past the lock timeout; try again
    };
    Result result = Result::NotFound;
    std::optional<JobRecord> job;
    std::string held_by;               ///< the assignee the operator took the job from
    store::Generation generation = 0;  ///< the generation that lost its authority
};

/// One job an operator cancelled: the state it was in and, if it was assigned, its holder.
struct Cancelled {
    store::JobId job_id = 0;
    store::OrgId org_id = 0;
    store::Generation generation = 0;
    std::string was;
    std::string holder;
};

/// A queue's settings to change: each unset field is kept; 0 (or a zero duration) sets it back to
/// none (max_assigned, run_timeout) or to the built-in default.
struct QueueSettings {
    std::optional<int> max_assigned;
    std::optional<int> max_attempts;
    std::optional<base::Duration> backoff_base;
    std::optional<base::Duration> backoff_cap;
    std::optional<base::Duration> run_timeout;
    /// How long finished jobs are kept, by the state they finished in (kRetainForever: never
    /// removed).
    std::optional<base::Duration> retain_completed;
    std::optional<base::Duration> retain_failed;
    std::optional<base::Duration> retain_discarded;
    std::optional<base::Duration> retain_cancelled;
    /// The rate limit: claims a second on average across every coordinator (0: no limit), and
    /// how many may go at once (the burst; unset: the queue's, or the rate rounded up).
    std::optional<double> rate_per_s;
    std::optional<int> rate_burst;
    /// The queue's share among the weighted queues a claim serves with it (1-1000; 0: none).
    std::optional<int> weight;
    /// Its pending jobs gain one priority per this much waited (at least a second; 0: no aging).
    std::optional<base::Duration> aging;
};

/// A retention that never ends (2^63-1 microseconds, as schema/baseline/tables.sql reads it).
inline constexpr base::Duration kRetainForever = base::Duration::max();

/// One organization's queue as `aclaimctl queue list` shows it.
struct QueueStatus {
    store::OrgId org_id = 0;
    std::string queue;
    /// The jobs in each state the query counted (0 for the others), up to its cap + 1.
    std::int64_t pending = 0, scheduled = 0, assigned = 0, completed = 0, discarded = 0, failed = 0,
                 cancelled = 0, quarantined = 0, parked = 0, waiting = 0;
    /// The run_at of the oldest pending job, in microseconds; none without pending jobs.
    std::optional<base::Micros> oldest_pending_us;
    /// The count of state `s`.
    std::int64_t& count(store::JobState s);
    std::int64_t count(store::JobState s) const;
    bool paused = false;
    std::optional<int> max_assigned;
    /// The rate limit as configured (its decimal text, exact) and burst; none: unlimited.
    std::optional<std::string> rate_per_s;
    std::optional<int> rate_burst;
    /// The whole tokens the queue's bucket holds at the query's `now`; none: unlimited.
    std::optional<int> rate_tokens;
    /// The weight (none: unweighted) and the aging step (none: not aged).
    std::optional<int> weight;
    std::optional<base::Duration> aging;
    std::optional<int> max_attempts;
    std::optional<base::Duration> backoff_base;
    std::optional<base::Duration> backoff_cap;
    std::optional<base::Duration> run_timeout;
    /// The retention in force per terminal state: the queue's setting or the built-in default.
    base::Duration retain_completed{}, retain_failed{}, retain_discarded{}, retain_cancelled{};
};

/// Which queues count_queues lists and what it counts.
struct QueueQuery {
    std::optional<std::vector<store::OrgId>> orgs;  ///< these organizations; none: every one
    /// The states counted. A queue is listed when it holds a job in one of them or has settings.
    std::vector<store::JobState> states;
    std::optional<std::int64_t> cap;      ///< count at most cap + 1 jobs per state; none: exact
    std::optional<int> queues_per_state;  ///< at most this many queues per organization and state
    std::optional<base::Instant> now;  ///< when rate limit buckets are read (none: as last spent)
};

/// Jobs per queue and state (sql::kOperatorQueues), in organization and queue order, on the
/// caller's transaction: the one count the console, `aclaimctl queue list` and the coordinator's
/// per-queue gauges read.
std::vector<QueueStatus> count_queues(pqxx::transaction_base& txn, const QueueQuery& query);

/// How fast a backlog drains: completions in the last minute and the time the pending jobs take
/// at that rate. Shown per queue and in total by `aclaimctl status` and the console's overview.
struct DrainRate {
    std::int64_t pending = 0;
    std::int64_t completed_last_minute = 0;
    double per_second() const { return static_cast<double>(completed_last_minute) / 60.0; }
    /// pending / rate; none while nothing completed in the last minute (the time is unknown).
    std::optional<base::Duration> time_left() const;
    DrainRate& operator+=(const DrainRate& other);
};

/// Completions in the minute before `now` per organization and queue (sql::kQueueCompletions),
/// on the caller's transaction; queues without any are left out.
std::map<std::pair<store::OrgId, std::string>, std::int64_t> completions_last_minute(
    pqxx::transaction_base& txn, const std::vector<store::OrgId>& orgs, base::Instant now);

/// A queue an organization has never had (no settings, no job), named where one must exist.
class UnknownQueue : public std::invalid_argument {
  public:
    UnknownQueue(store::OrgId org, const std::string& queue)
        : std::invalid_argument("organization " + std::to_string(org) + " has no queue '" + queue +
                                "' (no job and no settings)") {}
};

/// The operator console's reads and its fenced transitions over one connection. Time always
/// comes from the caller.
class OperatorStore {
  public:
    explicit OperatorStore(pqxx::connection& conn) : conn_(conn) {}

    /// Per organization (or only `org`), at `now`.
    std::vector<OrgStatus> status(base::Instant now,
                                  std::optional<store::OrgId> org = std::nullopt);

    std::optional<JobRecord> job(store::JobId id);
    /// The job's whole audit log, oldest first.
    std::vector<store::AuditEvent> events(store::JobId id);
    /// The progress last reported on the job (protocol 1.5, job_progress), when there is some.
    std::optional<ProgressRecord> progress(store::JobId id);
    /// The job's latest park (protocol 1.6, job_parks), when it was ever parked.
    std::optional<ParkRecord> park(store::JobId id);
    /// Its dependencies both ways and its exclusions.
    JobLinks links(store::JobId id);
    std::vector<JobRecord> list(const JobFilter& filter);

    /// Returns an assigned job to pending, giving back the attempt; the holder's generation loses
    /// its authority. `expected` pins the generation the operator looked at.
    OperatorOutcome release(store::JobId id, std::optional<store::Generation> expected,
                            const std::string& actor, const std::string& reason, base::Instant now);
    /// Fails an assigned job for good, recording `reason` as its last error.
    OperatorOutcome fail(store::JobId id, std::optional<store::Generation> expected,
                         const std::string& actor, const std::string& reason, base::Instant now);

    /// Cancels the listed jobs that are pending, scheduled or assigned; returns those it
    /// cancelled, in id order. The holders of assigned ones are told at once (aclaim_revoke).
    std::vector<Cancelled> cancel(const std::vector<store::JobId>& ids, const std::string& actor,
                                  const std::string& reason, base::Instant now);
    /// Gives the listed failed, discarded or cancelled jobs a fresh attempt budget, pending now;
    /// returns the ids it revived.
    std::vector<store::JobId> retry(const std::vector<store::JobId>& ids, const std::string& actor,
                                    const std::string& reason, base::Instant now);
    /// The ids of jobs matching the filter (paged through to the end), for the bulk forms of
    /// cancel and retry.
    std::vector<store::JobId> matching(JobFilter filter);

    /// Pauses or resumes one queue of an organization, audited in queue_events. The event is
    /// stamped from `clock` once the organization's queue lock is held: every claim stamped
    /// before it committed before it, which is what the checker's paused_queue_idle relies on.
    /// Without `allow_new`, a queue the organization has neither settings nor jobs in is refused
    /// with UnknownQueue (what operators' tools ask: a misspelt name is not a new queue).
    void pause(store::OrgId org, const std::string& queue, bool paused, const std::string& actor,
               const std::string& reason, const base::Clock& clock, bool allow_new = true);
    /// Changes a queue's settings, audited in queue_events; `allow_new` as in pause().
    void configure(store::OrgId org, const std::string& queue, const QueueSettings& settings,
                   const std::string& actor, base::Instant now, bool allow_new = true);
    std::vector<QueueStatus> queues(std::optional<store::OrgId> org = std::nullopt);

  private:
    OperatorOutcome act(bool release, store::JobId id, std::optional<store::Generation> expected,
                        const std::string& actor, const std::string& reason, base::Instant now);

    pqxx::connection& conn_;
};

}  // namespace aclaim::ops
