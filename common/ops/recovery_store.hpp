#pragma once

// Recovery after an outage, against the database: the bulk survey, the per-row apply on the
// locked current row, and the operator's quarantine actions. The decisions themselves are the
// pure classifier's (recovery.hpp); this file only reads, locks and writes.

#include <array>
#include <map>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "common/ops/recovery.hpp"

namespace aclaim::ops {

/// One job as the survey saw it.
struct JobSnapshot {
    JobRecord row;
    std::optional<ResultRecord> result;
    EventSummary events;
    std::optional<ProgressMark> progress;  ///< who wrote the job's saved progress, if any
    Classification classification;
};

/// Counts of the classes, indexed by RecoveryClass.
using ClassCounts = std::array<std::int64_t, std::size(kRecoveryClasses)>;

/// Everything one survey found, read from one consistent snapshot.
struct RecoveryReport {
    base::Instant now{};
    std::optional<store::OrgId> org;  ///< the organization filter, if any
    std::map<store::OrgId, ClassCounts> by_org;
    ClassCounts totals{};
    std::vector<JobSnapshot> inconsistent;  ///< in job id order
    std::vector<store::JobId> expired;      ///< in job id order
    std::vector<Orphan> orphans;            ///< results or events without a job row
    std::vector<QueueFinding> queues;       ///< queues whose rate buckets will not do as set
    /// Jobs retention removed (the prune ledger) whose events are still attached: absent, not
    /// orphans and not lost.
    std::size_t pruned_with_events = 0;
};

enum class ApplyAction {
    Reclaimed,    ///< expired lease taken back; the job is pending (or scheduled) again
    Discarded,    ///< expired lease on the last attempt: discarded, as the reaper does
    Quarantined,  ///< set aside for an operator with its reason
    Unchanged,    ///< the locked current row no longer needed this action
    Busy,         ///< another transaction held the row past the lock timeout; retry later
    Vanished,     ///< the row no longer exists
};

std::string_view to_string(ApplyAction a);

struct ApplyOutcome {
    store::JobId job_id = 0;
    store::OrgId org_id = 0;
    RecoveryClass surveyed = RecoveryClass::Pending;  ///< the class in the survey
    RecoveryClass locked = RecoveryClass::Pending;    ///< the class on the locked current row
    ApplyAction action = ApplyAction::Unchanged;
    std::string detail;
};

/// Everything `quarantine show` prints about one job.
struct JobDossier {
    JobSnapshot snapshot;
    std::vector<store::AuditEvent> events;  ///< every event of the job, in log order
};

/// An operator's release or fail of a quarantined job: done, or refused with the reason (nothing
/// changed).
struct QuarantineResolution {
    std::optional<std::string> refusal;
    store::JobState state = store::JobState::Quarantined;  ///< the state afterwards
    store::Generation generation = 0;                      ///< the generation afterwards
};

/// Not thread-safe: it works on the caller's connection.
class RecoveryStore {
  public:
    explicit RecoveryStore(pqxx::connection& conn) : conn_(conn) {}

    /// Reads jobs, job_results, job_events and job_progress (one statement each, in one
    /// repeatable-read snapshot) and classifies every job as of now.
    RecoveryReport survey(base::Instant now, std::optional<store::OrgId> org = std::nullopt);

    /// Acts on every expired and inconsistent job of the report, each in its own transaction.
    std::vector<ApplyOutcome> apply(const RecoveryReport& report, const std::string& actor);

    /// Locks the job's current row, re-reads its result and events, classifies it again as of now
    /// and acts on that decision: reclaims an expired lease, quarantines an inconsistent row that
    /// is not yet quarantined, and leaves everything else alone.
    ApplyOutcome apply_one(store::JobId job, RecoveryClass surveyed, base::Instant now,
                           const std::string& actor);

    /// The quarantined jobs, in id order.
    std::vector<JobRecord> quarantined();

    /// One job with all of its events; nullopt when it does not exist.
    std::optional<JobDossier> dossier(store::JobId job, base::Instant now);

    /// Returns a quarantined job to pending. Refused when the job is not quarantined or already
    /// has a published result (a second completion could not be published beside it).
    QuarantineResolution release(store::JobId job, const std::string& reason,
                                 const std::string& actor, base::Instant now);

    /// Fails a quarantined job for good. Its published result, if any, stays as it is.
    QuarantineResolution fail(store::JobId job, const std::string& reason, const std::string& actor,
                              base::Instant now);

  private:
    QuarantineResolution resolve(store::JobId job, bool release, const std::string& reason,
                                 const std::string& actor, base::Instant now);

    pqxx::connection& conn_;
};

}  // namespace aclaim::ops
