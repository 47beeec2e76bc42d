#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/proto/wire_errors.hpp"
#include "common/store/assignment.hpp"
#include "coordinator/http/histogram.hpp"

namespace aclaim::coordinator {

/// CURVE handshakes answered by the ZAP handler, by outcome, and what became of authenticated
/// connections. Written by the ZAP thread (and the router thread for sessions_revoked), read by
/// anyone. All stay zero in plaintext mode.
struct AuthCounters {
    std::atomic<std::uint64_t> accepted{0};  ///< 200: a live registered key
    std::atomic<std::uint64_t> refused{0};   ///< 400: unknown or revoked key, or not CURVE
    std::atomic<std::uint64_t> failed{0};    ///< 500: the key could not be looked up
    std::atomic<std::uint64_t> lookups{0};   ///< worker_keys queries (misses, re-checks)
    /// Sessions cut off because their connection's key was revoked while it was open.
    std::atomic<std::uint64_t> sessions_revoked{0};
};

/// Counters of everything the coordinator answered or did. Written by the router thread, the DB
/// threads and the reaper, read by anyone (the summary at exit, /metrics via http_server.hpp).
struct Metrics {
    using Counter = std::atomic<std::uint64_t>;
    static constexpr std::size_t kRejectionKinds = 7;

    Counter claims{0};           ///< CLAIMs answered with ASSIGNED
    Counter jobs_assigned{0};    ///< jobs handed out in those ASSIGNED replies
    Counter no_work{0};          ///< CLAIMs answered with NO_WORK
    Counter parked{0};           ///< times a CLAIM was parked to wait for work
    Counter renewals{0};         ///< RENEWs answered with LEASE
    Counter completions{0};      ///< COMPLETEs accepted (replays included)
    Counter failures{0};         ///< FAILs accepted
    Counter releases{0};         ///< RELEASEs accepted, and assignments released undelivered
    Counter replayed{0};         ///< accepted transitions that had already been committed
    Counter reclaims{0};         ///< leases the reaper took back
    Counter revocations{0};      ///< REVOKED sent (renewal refused or reclaim pushed)
    Counter replies_dropped{0};  ///< replies whose peer was gone or not reading
    Counter requests{0};         ///< frames received on the ROUTER
    /// Requests the router answered itself because the database had not by their deadline.
    Counter db_deadline_answers{0};
    /// Database connections cut because a statement on them passed its deadline.
    Counter db_connections_abandoned{0};
    std::atomic<std::int64_t> connected_sessions{0};    ///< sessions currently open
    std::array<Counter, kRejectionKinds> rejections{};  ///< REJECTED/REVOKED, by Rejection
    std::array<Counter, common::proto::errors::kCounted.size()> errors{};  ///< ERRORs by code

    /// Statements timed by statement_latency: the five request kinds in RequestKind order, then
    /// the reaper's reclaim.
    static constexpr std::array<std::string_view, 7> kStatements{
        "claim", "renew", "complete", "fail", "release", "reclaim", "prune"};
    static constexpr std::size_t kReclaimStatement = 5;
    /// The retention thread's prune batch.
    static constexpr std::size_t kPruneStatement = 6;
    /// A CLAIM from its hand-over to a DB thread until its outcome is back on the router thread:
    /// queue wait, statement, commit and mailbox, without any long-poll parking.
    Histogram claim_latency;
    /// Where the time of a claim that was granted jobs went: waiting for a DB thread, its
    /// statements up to the commit, the commit (the WAL flush), and from the DB thread's end
    /// until the ASSIGNED reply left the router thread (the mailbox and the send).
    static constexpr std::array<std::string_view, 4> kClaimStages{"queue_wait", "statement",
                                                                  "commit", "reply"};
    std::array<Histogram, kClaimStages.size()> claim_stages;
    std::array<Histogram, kStatements.size()>
        statement_latency;                      ///< one store call, by kStatements
    std::atomic<std::int64_t> db_queued{0};     ///< requests waiting for a DB thread (sampled 1/s)
    std::atomic<std::int64_t> db_in_flight{0};  ///< requests handed to DB threads (sampled 1/s)
    /// What retention did, as the retention thread of this coordinator saw it (only the holder of
    /// the retention lock prunes). Finished jobs removed by their state, in kPrunedStates order.
    static constexpr std::array<std::string_view, 4> kPrunedStates{"completed", "failed",
                                                                   "discarded", "cancelled"};
    std::array<Counter, kPrunedStates.size()> pruned_jobs{};
    Counter pruned_results{0};         ///< job_results rows removed with their jobs
    Counter retention_passes{0};       ///< passes this coordinator ran holding the retention lock
    Counter retention_passes_idle{0};  ///< passes left to the coordinator that held the lock
    Counter partitions_created{0};     ///< job_events partitions this coordinator created
    /// job_events partitions by state (kPartitionStates order), as read at the end of the last
    /// pass; -1 before the first.
    static constexpr std::array<std::string_view, 4> kPartitionStates{"attached", "detaching",
                                                                      "archived", "dropped"};
    std::array<std::atomic<std::int64_t>, kPartitionStates.size()> partitions{-1, -1, -1, -1};
    /// Seconds since the epoch at which the last attached partition ends (0: unknown).
    std::atomic<std::int64_t> partitions_cover_until_s{0};
    /// The ZAP handler's counters; kept here so that /metrics can serve them from the start.
    AuthCounters auth;
    /// Steady-clock nanoseconds of the router thread's last housekeeping; 0 before it serves.
    std::atomic<std::int64_t> router_tick_ns{0};

    void count_rejection(common::Rejection r);
    void count_error(std::string_view code);
    std::uint64_t rejections_of(common::Rejection r) const;
    std::uint64_t errors_of(std::string_view code) const;

    /// One line with every non-zero counter, for the log at exit.
    std::string summary() const;
};

}  // namespace aclaim::coordinator
