#pragma once

// The canary's reading of the audit log: claim order against the declared order, duplicate
// claims and stale acceptances, reconstructed from job_events of the canary's organization.
//
// A claim's displacement is the number of better-ranked jobs (priority DESC, enqueued_at, id)
// that were still pending, in log order, when it was taken; 0 is strict order. Log order is the
// job_events id, assigned when a statement inserts its event, i.e. after it locked its rows.
// Claims of one statement share its time and are taken together, so they do not displace each
// other. The follower reads the log one pass behind: a pass settles only events at or below the
// highest id the previous pass saw, so an event whose transaction had not committed yet is not
// skipped.

#include <cstdint>
#include <ext/pb_ds/assoc_container.hpp>
#include <ext/pb_ds/tree_policy.hpp>
#include <pqxx/pqxx>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "common/ops/checker.hpp"
#include "common/store/assignment.hpp"

namespace aclaim::drills {

/// One audit event with the rank fields of its job.
struct AuditEvent {
    std::int64_t id = 0;
    store::JobId job_id = 0;
    store::Generation generation = 0;
    std::string kind;
    base::Micros at_us = 0;  ///< the statement's time: shared by the claims of one statement
    int priority = 0;
    base::Micros enqueued_us = 0;
};

/// What one pass over newly settled events found.
struct AuditSlice {
    std::vector<std::int64_t> displacement;  ///< one per settled claim, in log order
    std::int64_t duplicate_claims = 0;       ///< a claim of a job another lease still held
    std::int64_t stale_acceptances = 0;      ///< a completion not of the job's current lease
    std::int64_t returned = 0;               ///< jobs back to pending (released, reclaimed)
    std::int64_t unknown_jobs = 0;           ///< events of jobs whose enqueue was not seen
    std::vector<std::string> evidence;       ///< one line per duplicate, stale or unknown event

    void add(const AuditSlice& other);
};

struct DisplacementSummary {
    std::size_t claims = 0;
    double mean = 0;
    std::int64_t p50 = 0;
    std::int64_t p99 = 0;
    std::int64_t max = 0;
    double displaced_share = 0;  ///< claims not in strict order
};

DisplacementSummary summarize_displacement(std::vector<std::int64_t> displacement);

class AuditFollower {
  public:
    explicit AuditFollower(store::OrgId org) : org_(org) {}

    /// Reads the events added since the last pass and settles those the previous pass had
    /// already seen the id range of.
    AuditSlice advance(pqxx::connection& conn);

    /// Settles every event visible now: for the end of a run, when nothing is in flight.
    AuditSlice drain(pqxx::connection& conn);

    /// Settles events in log order. Claims that share a time came from one statement (a
    /// coalesced claim takes several jobs at once): none of them counts the others as better
    /// jobs passed over.
    void apply(const std::vector<AuditEvent>& events, AuditSlice& out);

  private:
    /// Claim order: priority DESC, enqueued_at, id.
    using Rank = std::tuple<int, base::Micros, store::JobId>;
    using RankSet =
        __gnu_pbds::tree<Rank, __gnu_pbds::null_type, std::less<Rank>, __gnu_pbds::rb_tree_tag,
                         __gnu_pbds::tree_order_statistics_node_update>;
    enum class State { Pending, Assigned, Done };
    struct Track {
        Rank rank;
        State state = State::Pending;
        store::Generation generation = 0;
    };

    std::vector<AuditEvent> read_after(pqxx::connection& conn, std::int64_t after);
    void apply_one(const AuditEvent& event, AuditSlice& out);

    store::OrgId org_;
    std::int64_t settled_ = 0;  ///< highest event id applied
    std::int64_t horizon_ = 0;  ///< highest event id seen by the previous pass
    RankSet pending_;
    std::unordered_map<store::JobId, Track> jobs_;
};

/// The invariant checker over the organization's part of the database only, so that a canary
/// run against a shared server judges nothing but its own jobs.
ops::CheckReport check_organization(pqxx::connection& conn, store::OrgId org);

}  // namespace aclaim::drills
