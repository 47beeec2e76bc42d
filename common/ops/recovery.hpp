#pragma once

// Recovery after an outage: the pure classifier. Given one job row's durable fields, its
// published result (if any) and a summary of its audit log, it decides whether the job is
// terminal, holds a live or an expired lease, waits as pending, or contradicts itself. It reads no
// database and no clock, so every decision can be tested on hand-built rows.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/base/clock.hpp"
#include "common/ops/job_record.hpp"
#include "common/store/assignment.hpp"

namespace aclaim::ops {

/// What the audit log of one job says, condensed so that it can be read in bulk.
///
/// An operator's resolution of a quarantine (an 'unquarantined' event) acknowledges the history
/// before it: completions and organizations are summarised only over the events after the latest
/// resolution, so that a job the operator released or failed is not quarantined again for the
/// contradiction the operator already decided on.
struct EventSummary {
    std::int64_t total = 0;
    /// Highest generation on any event except 'rejected' (which quotes what a caller claimed,
    /// not what the coordinator granted).
    store::Generation max_generation = 0;
    /// The event carrying max_generation (latest by id on ties).
    std::optional<store::AuditEvent> top;
    /// The claim with the highest generation.
    std::optional<store::AuditEvent> latest_claim;
    /// The latest operator resolution ('unquarantined').
    std::optional<store::AuditEvent> resolution;
    /// 'completed' events after the resolution: how many, their generations in log order, the last.
    std::int64_t completions = 0;
    std::vector<store::Generation> completion_generations;
    std::optional<store::AuditEvent> latest_completion;
    /// Distinct organizations of the events after the resolution, ascending.
    std::vector<store::OrgId> orgs;
};

/// parked: handed to an outside system (protocol 1.6); its callback or, past the park's deadline,
/// the reaper decides it, and recovery leaves it to them (a park holds no lease to reclaim).
/// Waiting: enqueued with dependencies not all ended; nothing holds it and recovery leaves it
/// exactly as it is (its last dependency's ending unblocks it, schema/baseline/tables.sql).
enum class RecoveryClass { Terminal, Live, Expired, Pending, Inconsistent, Parked, Waiting };

inline constexpr RecoveryClass kRecoveryClasses[] = {
    RecoveryClass::Terminal,    RecoveryClass::Live,    RecoveryClass::Expired,
    RecoveryClass::Pending,     RecoveryClass::Waiting, RecoveryClass::Parked,
    RecoveryClass::Inconsistent};

std::string_view to_string(RecoveryClass c);

/// A contradiction between a row, its result and its log that no single-row CHECK can see.
/// Declared in the order a report names them: the first one found is a row's reason.
enum class Contradiction {
    AlreadyQuarantined,                ///< set aside earlier; its recorded reason stands
    ForeignOrganizationEvents,         ///< the log of the job holds events of another organization
    GenerationBehindLog,               ///< the log granted a higher generation than the row holds
    ClaimMissingFromLog,               ///< the row holds a generation the log never granted
    ResultForUnfinishedRow,            ///< a result is published but the row is not completed
    CompletedWithoutResult,            ///< the row is completed but nothing was published
    ResultMismatch,                    ///< the published result is of another generation/ref/org
    CompletionEventMissing,            ///< the row is completed but the log has no completion
    CompletionEventMismatch,           ///< the logged completion has another generation or ref
    CompletedMoreThanOnce,             ///< the log records more than one accepted completion
    CompletionLoggedForUnfinishedRow,  ///< the log records a completion the row does not show
    ProgressOfUngrantedGeneration,     ///< saved progress of a generation the row never reached
    ForeignOrganizationProgress,       ///< saved progress of another organization
};

std::string_view to_string(Contradiction c);

struct Finding {
    Contradiction code = Contradiction::AlreadyQuarantined;
    std::string what;  ///< which fact contradicts which, in one sentence
};

struct Classification {
    RecoveryClass cls = RecoveryClass::Pending;
    std::vector<Finding> findings;  ///< non-empty exactly when cls is Inconsistent
    std::string evidence;           ///< for inconsistent rows: the row, result and events involved

    /// The first finding's code, e.g. "result_for_unfinished_row"; empty unless inconsistent.
    std::string reason() const;
    /// Every finding as "code: what", one per line: what the quarantine records.
    std::string explanation() const;
};

/// The job's saved progress (protocol 1.5, job_progress) as far as recovery reads it: who wrote
/// it. Only a holder of a granted generation writes progress (fenced on the row), so a report of
/// a generation the row never reached, or of another organization, was written outside the
/// contract.
struct ProgressMark {
    store::Generation generation = 0;
    store::OrgId org_id = 0;
};

/// Classifies one job as of now. A row is inconsistent if any contradiction holds; otherwise
/// completed and failed rows are terminal, pending rows pending, and assigned rows live while
/// lease_expires_at > now and expired from the instant it is reached, as the reaper decides.
Classification classify(const JobRecord& row, const std::optional<ResultRecord>& result,
                        const EventSummary& events, base::Instant now,
                        const std::optional<ProgressMark>& progress = std::nullopt);

/// Published results or events whose job row does not exist: reported, never acted on.
struct Orphan {
    store::JobId job_id = 0;
    store::OrgId org_id = 0;
    std::string reason;  ///< "orphan_result" or "orphan_events"
    std::string evidence;
};

/// A queue's rate-limit bucket (schema/baseline/tables.sql) as recovery reads it.
struct RateBucket {
    store::OrgId org_id = 0;
    std::string queue;
    double rate_per_s = 0;
    std::int64_t burst = 0;
    std::optional<double> tokens;  ///< NULL until the first claim spends from it
    std::optional<std::int64_t> refilled_us;
};

/// A queue whose state will not do what its settings say: reported, never acted on (the operator
/// decides, e.g. `aclaimctl queue set --rate` re-bases the bucket).
struct QueueFinding {
    store::OrgId org_id = 0;
    std::string queue;
    std::string reason;  ///< "rate_bucket_ahead_of_clock" or "rate_tokens_above_burst"
    std::string what;
};

/// How far a bucket's last refill may lie ahead of now before it is a finding: the clocks of
/// several coordinators and the tool disagree by that much at most in a healthy deployment.
inline constexpr base::Duration kRateClockTolerance = std::chrono::seconds(1);

/// A bucket whose last refill lies ahead of now by more than kRateClockTolerance (a clock set
/// back, a restore onto a host whose clock is behind: the queue earns no token until the clock
/// passes it), or that holds more tokens than its burst. nullopt for a sound bucket.
std::optional<QueueFinding> check_rate_bucket(const RateBucket& bucket, base::Instant now);

/// `pruned`: the prune ledger names the job. Its remaining events are then no orphan (the job is
/// absent by design); a result left behind still is, since retention removes both together.
std::optional<Orphan> orphan_of(store::JobId job, const std::optional<ResultRecord>& result,
                                const std::optional<EventSummary>& events, bool pruned = false);

/// "2026-03-01T12:00:00Z", with ".ffffff" only when the microseconds are not zero.
std::string format_instant(base::Instant t);
/// Accepts "@<microseconds since the epoch>" or ISO 8601 "YYYY-MM-DDTHH:MM:SS[.f...](Z|±HH:MM)"
/// (a space may stand for the T).
std::optional<base::Instant> parse_instant(std::string_view text);

/// One-line renderings used in evidence and reports.
std::string describe(const JobRecord& row);
std::string describe(const ResultRecord& result);
std::string describe(const store::AuditEvent& event);
std::string describe(const EventSummary& events);

}  // namespace aclaim::ops
