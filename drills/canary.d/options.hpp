#pragma once

// Everything aclaim-canary is told: the load shape, the coordinator it starts, the synthetic
// pollers and the fault it may inject into its own contract checker.

#include <optional>
#include <string>

#include "common/store/assignment.hpp"
#include "drills/canary.d/shape.hpp"

namespace aclaim::drills {

/// A contract violation the checker is made to see, to prove the back-off path.
struct InjectedViolation {
    enum class Kind { Displacement, Duplicate };
    Kind kind = Kind::Displacement;
    /// The interval (second of the run, from 0) whose judgement sees it.
    int second = 0;
};

std::string_view to_string(InjectedViolation::Kind kind);
/// Parses "displacement@3" or "duplicate@5"; nullopt when malformed.
std::optional<InjectedViolation> parse_injected_violation(std::string_view text);

struct CanaryOptions {
    /// PostgreSQL connection string; the canary works in an organization of its own there.
    std::string dsn;
    /// The aclaim-coordinator binary to start; empty means the one next to aclaim-canary.
    std::string coordinator;
    /// Where report.json, report.md, chart.svg and the logs go.
    std::string out;
    /// How the poller count moves over the run.
    Shape shape = Shape::Ramp;
    /// Length of the run in seconds, each one interval of measurement.
    int seconds = 20;
    /// Pollers at the start of the run (ramp, step, spike).
    int start_pollers = 2;
    /// Pollers at the top of the shape.
    int max_pollers = 16;
    /// Queues the jobs are dealt over; every poller serves them all.
    int queues = 3;
    /// How long a poller holds each job before completing it, in milliseconds.
    int review_ms = 200;
    /// Long-poll budget of each CLAIM, in milliseconds.
    int claim_wait_ms = 200;
    /// Lease granted by the coordinator, in milliseconds.
    int lease_ms = 5000;
    /// Renewal interval the coordinator asks of workers, in milliseconds; 0: a third of the lease.
    int heartbeat_ms = 150;
    /// The coordinator's database threads: the claim statements that can run at once.
    int db_threads = 2;
    /// Whether the coordinator runs queued claims of one organization as one statement.
    bool coalesce = true;
    /// The organization to work in; 0 picks a fresh one. It must hold no jobs yet.
    store::OrgId org = 0;
    /// Run the coordinator and the pollers without CURVE (to measure without encryption). By
    /// default the coordinator gets a key pair and every poller a key registered for the
    /// canary's organization, as deployed workers have.
    bool plaintext = false;
    /// spdlog level of the coordinator's log file.
    std::string coordinator_log_level = "warn";
    /// A violation to feed the contract checker, if any.
    std::optional<InjectedViolation> inject;

    /// Throws std::invalid_argument naming the first setting that cannot work.
    void validate() const;
};

/// Parses the command line (with ACLAIM_* fallbacks). Exits for --help and for bad input.
CanaryOptions parse_canary_options(int argc, char** argv);

}  // namespace aclaim::drills
