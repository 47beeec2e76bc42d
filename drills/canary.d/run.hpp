#pragma once

// One canary run: migrate, pick a fresh organization, keep its backlog topped up, start a real
// aclaim-coordinator, follow the load shape with synthetic pollers for the declared seconds,
// judge every interval against the contract, back off on a violation, then stop everything and
// judge the whole run from the complete audit log.

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "drills/canary.d/contract.hpp"
#include "drills/canary.d/options.hpp"

namespace aclaim::drills {

struct RunResult {
    CanaryOptions options;
    store::OrgId org = 0;
    std::string endpoint;
    base::Micros started_at_us = 0;  ///< wall clock at the start of interval 0
    double seconds_run = 0;          ///< measured length, shorter when interrupted
    ContractBounds bounds;
    std::vector<Interval> intervals;

    PollerCounts seen_total;
    LatencySummary claim_latency_total;
    LockSlice locks_total;
    ProbeSlice probe_total;
    LatencySummary probe_latency_total;
    CoordinatorTiming coordinator_total;  ///< the coordinator's claim timing over the run
    std::int64_t enqueued_total = 0;
    RunFacts facts;  ///< recomputed from the complete audit log at the end

    std::vector<Violation> violations;  ///< every interval's and the end-of-run judgement's
    std::vector<std::string> problems;  ///< what kept the run from measuring all it promised
    bool interrupted = false;           ///< stopped early by a signal
    int coordinator_exit = -1;

    /// 1 when the contract was violated (injected or not), else 2 when the run could not measure
    /// all it promised, else 0.
    int exit_code() const;
    std::string verdict() const;
};

/// Called after each interval is judged, for live progress.
using IntervalObserver = std::function<void(const RunResult&, const Interval&)>;

/// Runs the canary. `stop` cuts it short (the report still covers what ran). Throws only for
/// what prevents starting at all (database unreachable, coordinator binary missing or not
/// answering); everything after that ends up in the result.
RunResult run_canary(const CanaryOptions& options, const std::atomic<bool>& stop,
                     const IntervalObserver& observer);

}  // namespace aclaim::drills
