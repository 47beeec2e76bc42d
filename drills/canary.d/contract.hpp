#pragma once

// The canary's contract (drills/canary.d/contract.md), judged on every one-second interval and once
// more on the whole run, and the back-off it triggers. Pure: everything it judges is measured
// elsewhere and handed in, so the rules are the same for real and injected violations.

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "common/ops/checker.hpp"
#include "common/store/assignment.hpp"
#include "drills/canary.d/audit.hpp"
#include "drills/canary.d/metrics.hpp"
#include "drills/canary.d/observers.hpp"
#include "drills/canary.d/options.hpp"
#include "drills/canary.d/stats.hpp"

namespace aclaim::drills {

struct Violation {
    int second = -1;  ///< the interval judged; -1 for the end-of-run judgement
    std::string rule;
    std::string evidence;
    bool injected = false;  ///< produced by --inject-violation, not measured
    int level = 0;          ///< pollers in force when it was seen
    int backed_off_to = 0;  ///< pollers from the next interval on (0: the run had ended)
};

/// Everything measured in one interval.
struct Interval {
    int second = 0;
    int pollers = 0;  ///< the level in force: the shape, capped by any back-off
    /// The displacement bound for the claims settled now, taken at this level or the one before.
    std::int64_t displacement_bound = 0;
    PollerCounts seen;
    LatencySummary claim_latency;  ///< worker side: CLAIM sent until ASSIGNED
    AuditSlice audit;              ///< claims settled by this interval's pass over the log
    DisplacementSummary displacement;
    LockSlice locks;
    ProbeSlice probe;
    LatencySummary probe_latency;   ///< one direct claim per second: statement and commit
    CoordinatorTiming coordinator;  ///< the coordinator's own claim timing, from /metrics
    BacklogSlice backlog;
    std::optional<InjectedViolation::Kind> injected;
    std::vector<Violation> violations;
};

struct ContractBounds {
    int db_threads = 2;    ///< the coordinator's claim statements that can run at once
    bool coalesce = true;  ///< the coordinator runs queued claims of one organization as one

    /// k: connections that can run a claim statement at once, the canary's probe included.
    int claimers() const { return db_threads + 1; }
    /// m: jobs one claim statement may take while `pollers` pollers claim one job each.
    int jobs_per_statement(int pollers) const { return coalesce ? std::max(1, pollers) : 1; }
    /// (k-1)*m: each other claimer's statement may hold m better-ranked rows the claim passes over.
    std::int64_t displacement_bound(int pollers) const;
};

ContractBounds contract_for(const CanaryOptions& options);

/// Rule names and their text, in the order they are judged.
struct Rule {
    std::string name;
    std::string text;
};
std::vector<Rule> contract_rules(const ContractBounds& bounds);

/// The interval's violations. An injected kind replaces the measured value it names.
std::vector<Violation> judge(const Interval& interval, const ContractBounds& bounds);

/// The whole run, recomputed from the complete audit log after every process stopped.
struct RunFacts {
    AuditSlice audit;
    DisplacementSummary displacement;
    std::int64_t duplicate_assignments = 0;  ///< worker side, the whole run
    ops::CheckReport check;
    int max_pollers = 0;  ///< the highest level in force, for the whole-run bound
};
std::vector<Violation> judge_run(const RunFacts& facts, const ContractBounds& bounds);

/// Back off to the last level that passed when it is lower than the violating one, otherwise to
/// half of it (at least 1); the cap then holds until the end of the run.
class BackOff {
  public:
    explicit BackOff(int max_pollers) : cap_(max_pollers) {}
    int cap() const { return cap_; }
    /// Records the judgement of an interval run at `level`; returns the new cap on a violation.
    std::optional<int> record(int level, bool violated);

  private:
    int cap_;
    std::optional<int> last_good_;
};

}  // namespace aclaim::drills
