#pragma once

// The invariant checker: proves from jobs, job_events and job_results alone that nothing was
// lost, completed twice or accepted from a stale generation. Pure over a loaded history so that
// corrupted histories can be fed to it in unit tests.

#include <map>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/ops/job_record.hpp"
#include "common/ops/pruned.hpp"
#include "common/store/assignment.hpp"

namespace aclaim::ops {

/// The columns of a jobs row the invariants read. Narrower than JobRecord on purpose: the checker
/// reads every row of the table in one snapshot.
struct JobRow {
    store::JobId id = 0;
    store::OrgId org_id = 0;
    std::string state;
    store::Generation generation = 0;
    std::optional<std::string> result_ref;
    std::optional<std::string> quarantine_reason;
    std::string queue{base::kDefaultQueue};
};

/// A job's priority now and, when aging raised it, the one it was enqueued with: read by the
/// aging_bound_kept invariant only.
struct JobPriority {
    int priority = 0;
    std::optional<int> base_priority;
};

/// One row of queue_events: a pause, resume or settings change of an organization's queue.
struct QueueEvent {
    store::OrgId org_id = 0;
    std::string queue;
    std::string kind;  ///< paused, resumed, configured
    base::Instant at{};
    std::string detail;  ///< configured: "max_assigned=3, ..." as aclaimctl queue set wrote it
};

/// One row of schedule_ticks: a tick of a schedule a scheduler enqueued, with the job it made.
struct ScheduleTick {
    store::OrgId org_id = 0;
    std::int64_t schedule_id = 0;
    base::Instant tick{};
    store::JobId job_id = 0;
};

/// One row of job_dependencies (schema/baseline/tables.sql): job_id waits for depends_on.
struct DependencyEdge {
    store::JobId job_id = 0;
    store::JobId depends_on = 0;
    std::string policy;  ///< cancel, run
};

/// One row of job_exclusions (schema/baseline/tables.sql): job_id may not go to excluded_key, or to
/// whoever completed completer_of (the other one empty / 0).
struct Exclusion {
    store::JobId job_id = 0;
    std::string excluded_key;
    store::JobId completer_of = 0;
};

struct History {
    std::vector<JobRow> jobs;
    std::vector<store::AuditEvent> events;  ///< in id order
    std::vector<ResultRecord> results;
    std::vector<QueueEvent> queue_events;  ///< in id order
    std::vector<PrunedRange> pruned;       ///< the prune ledger: jobs absent by design, any order
    std::vector<ScheduleTick> schedule_ticks;  ///< in id order
    /// The priority of each job whose row names one (jobs of aged queues are the ones read).
    std::unordered_map<store::JobId, JobPriority> priorities;
    std::vector<DependencyEdge> dependencies;  ///< any order
    std::vector<Exclusion> exclusions;         ///< any order
};

/// The invariants, by name.
enum class Invariant {
    SingleCompletion,     ///< no job has two accepted completions
    CompletionIsCurrent,  ///< every accepted completion is of the latest claim, while its lease is
                          ///< held
    GenerationsIncrease,  ///< claims of a job carry strictly increasing generations
    LeasesDisjoint,       ///< a job is claimed again only after the previous lease ended
    NothingLost,  ///< every enqueued job exists and is terminal, live, pending or quarantined with
                  ///< a reason
    ResultMatchesRow,     ///< completed rows and published results agree
    SameOrganization,     ///< no event or result crosses organizations
    ClaimAfterRunAt,      ///< a job scheduled for later (a delay or a retry's backoff) is claimed
                          ///< only after it came due
    PausedQueueIdle,      ///< no claim from a queue while it is paused
    LimitRespected,       ///< a queue never has more leases out than its max_assigned
    EndedStaysEnded,      ///< nothing is claimed or completed after a job was cancelled, discarded
                          ///< or failed, unless an operator revived it (retried)
    PrunedIsAbsent,       ///< a job the prune ledger names has no row and no result left
    PrunedWasFinished,    ///< a pruned job whose history is still attached had finished, and was
                          ///< neither quarantined nor waiting nor assigned when it went
    ScheduleTickOnce,     ///< no tick of a schedule was enqueued twice
    CheckpointIsCurrent,  ///< every saved checkpoint (protocol 1.5) is of the latest claim, while
                          ///< its lease is held
    RateRespected,        ///< no claim from a rate-limited queue found its token bucket empty
    ParkFinishedOnce,     ///< a job is parked (protocol 1.6) only by the holder of its latest
                          ///< claim, and its callback's outcome is accepted at most once, for the
                          ///< generation that parked it, while the park was open
    AgingBoundKept,       ///< no job of an aged queue waited past its aging bound while a younger
                          ///< job of the queue was claimed
    DependenciesFirst,    ///< no job was claimed before all its dependencies were completed (or,
                          ///< under the policy 'run', had ended)
    ExcludedNeverCompleted,  ///< no job was completed by a reviewer it excludes: one it names, or
                             ///< the one who completed a job it names
};

/// How long before a resume a claim may be stamped and still be legitimate: a claim carries the
/// time it was dispatched, and one dispatched just before a resume may run just after it.
inline constexpr base::Duration kResumeTolerance = std::chrono::seconds(1);

std::string_view to_string(Invariant i);

struct Violation {
    Invariant invariant;
    store::JobId job_id = 0;
    std::string evidence;
};

struct CheckReport {
    std::size_t jobs = 0;
    std::size_t events = 0;
    std::map<std::string, std::size_t> states;
    std::size_t accepted_completions = 0;
    std::size_t rejections = 0;
    std::size_t reclaims = 0;
    /// Jobs the prune ledger records as removed by retention, and how many of them still have
    /// events in the attached partitions of job_events.
    std::size_t pruned = 0;
    std::size_t pruned_with_history = 0;
    std::vector<Violation> violations;
    bool ok() const { return violations.empty(); }
};

CheckReport check(const History& history);

/// Loads the whole history (jobs, events, results, queue events, the prune ledger, schedule
/// ticks, dependency edges) in one snapshot.
History load_history(pqxx::connection& conn);

}  // namespace aclaim::ops
