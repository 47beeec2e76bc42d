#pragma once

#include <cstdint>
#include <string>

#include "worker/client.hpp"
#include "worker/review_time.hpp"

namespace aclaim::worker {

/// Everything aclaim-worker can be told, by flag or ACLAIM_* environment variable.
struct WorkerOptions {
    ClientOptions client;
    Millis review_mean{200};  ///< mean simulated review time
    ReviewDist review_dist = ReviewDist::Fixed;
    std::int64_t jobs = 0;         ///< exit 0 after this many accepted completions; 0: no limit
    std::int32_t concurrency = 1;  ///< jobs held at once
    std::int32_t claim_wait_ms = 1000;  ///< long-poll budget of each CLAIM
    std::int64_t crash_after =
        -1;                ///< SIGKILL itself mid-review after this many completions; <0: never
    std::string poison;    ///< a payload that makes the worker SIGKILL itself mid-review
    Millis stall{0};       ///< first job: stop heartbeating this long, then complete anyway
    double fail_rate = 0;  ///< probability of a retryable FAIL instead of COMPLETE
    Millis idle_exit{0};   ///< exit 0 after this long without work; 0: never
    /// Review each job in this many steps, saving a checkpoint (protocol 1.5's PROGRESS) after
    /// each but the last, and resume a job from the checkpoint an earlier holder saved; 0: off.
    std::int32_t checkpoint_steps = 0;
    /// Park every Nth review instead of completing it (protocol 1.6), handing its callback token
    /// to --result-file for an outside completion to rehearse; 0: off.
    std::int64_t park_every = 0;
    std::int64_t park_timeout_ms = 3'600'000;  ///< the park's deadline, from when it is parked
    std::string log_level = "info";
    std::string result_file;  ///< JSON line per verdict, appended; empty: none
};

/// Parses flags (falling back to environment variables). Exits the process for --help and for
/// invalid input, the way command-line tools do.
WorkerOptions parse_options(int argc, char** argv);

/// The same, throwing CLI11's ParseError (with the flag's name in its text) instead of exiting.
WorkerOptions parse_options_or_throw(int argc, const char* const* argv);

}  // namespace aclaim::worker
