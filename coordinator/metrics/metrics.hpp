#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/proto/wire_errors.hpp"
#include "common/store/assignment.hpp"
#include "coordinator/metrics/family.hpp"
#include "coordinator/metrics/histogram.hpp"

namespace aclaim::coordinator::metrics {

/// CURVE handshakes answered by the ZAP handler, by outcome, and what became of authenticated
/// connections. Written by the ZAP thread (and the router thread for sessions_revoked), read by
/// anyone. All stay zero in plaintext mode.
struct AuthCounters {
    explicit AuthCounters(Registry& registry);

    Family handshakes;
    Counter accepted;  ///< 200: a live registered key
    Counter refused;   ///< 400: unknown or revoked key, or not CURVE
    Counter failed;    ///< 500: the key could not be looked up
    Single<Counter> lookups;
    Single<Counter> sessions_revoked;
};

/// What the result notifier did: notifications sent and rounds that failed. Written by its
/// thread, read by anyone.
struct ResultNotifierCounters {
    explicit ResultNotifierCounters(Registry& registry);

    Single<Counter> sent;
    Single<Counter> failed_rounds;
};

/// What the listener made of the notifications it heard. Any database login may NOTIFY on any
/// channel, so a notification only wakes or asks for a check: a payload that is malformed, or
/// (aclaim_revoke) that its job's row does not bear out, is dropped and counted here. Written by
/// the listener's thread, read by anyone.
struct NotificationCounters {
    /// The channels the coordinator LISTENs on.
    enum class Channel { Jobs, Schedule, Revoke };
    static constexpr base::EnumNames<Channel, 3> kChannels{
        {"aclaim_jobs", "aclaim_schedule", "aclaim_revoke"}};
    static_assert(kChannels.covers(Channel::Revoke));

    explicit NotificationCounters(Registry& registry);

    Named<Counter, Channel, 3> forged;
    /// aclaim_revoke notifications that their rows bore out, pushed on as revocations.
    Single<Counter> revocations_verified;
    /// The one statement that checks a batch of aclaim_revoke notifications against their rows.
    Single<HistogramSeries> check_latency;
};

/// Every family the coordinator exports, each declared once here with its name, help, type and
/// labels: the exposition text is generated from these declarations (exposition.hpp). Written by
/// the router thread, the DB threads and the reaper, read by anyone (the summary at exit,
/// /metrics via http_server.hpp). A series is a plain atomic: counting costs what it did before
/// the declarations carried their text (docs/performance.md, "Metrics cost").
struct Metrics {
    static constexpr std::size_t kRejectionKinds = 7;
    /// Statements timed by statement_latency: the seven request kinds, the reaper's reclaim and
    /// the retention thread's prune batch.
    enum class Statement { Claim, Renew, Complete, Fail, Release, Progress, Park, Reclaim, Prune };
    static constexpr base::EnumNames<Statement, 9> kStatements{
        {"claim", "renew", "complete", "fail", "release", "progress", "park", "reclaim", "prune"}};
    static_assert(kStatements.covers(Statement::Prune));
    /// Where the time of a claim that was granted jobs went: waiting for a DB thread, its
    /// statements up to the commit, the commit (the WAL flush), and from the DB thread's end
    /// until the ASSIGNED reply left the router thread (the mailbox and the send).
    enum class ClaimStage { QueueWait, Statement, Commit, Reply };
    static constexpr base::EnumNames<ClaimStage, 4> kClaimStages{
        {"queue_wait", "statement", "commit", "reply"}};
    static_assert(kClaimStages.covers(ClaimStage::Reply));
    /// Finished jobs removed by retention, by their state.
    enum class PrunedState { Completed, Failed, Discarded, Cancelled };
    static constexpr base::EnumNames<PrunedState, 4> kPrunedStates{
        {"completed", "failed", "discarded", "cancelled"}};
    static_assert(kPrunedStates.covers(PrunedState::Cancelled));
    /// job_events partitions by state.
    enum class PartitionState { Attached, Detaching, Archived, Dropped };
    static constexpr base::EnumNames<PartitionState, 4> kPartitionStates{
        {"attached", "detaching", "archived", "dropped"}};
    static_assert(kPartitionStates.covers(PartitionState::Dropped));
    /// The per-tenant limits (RouterOptions) a request or a handshake was refused at.
    enum class TenantLimit {
        SessionsPerKey,
        SessionsPerOrg,
        ParkedPerSession,
        ParkedPerOrg,
        FdReserve
    };
    static constexpr base::EnumNames<TenantLimit, 5> kTenantLimits{
        {"sessions_per_key", "sessions_per_org", "parked_per_session", "parked_per_org",
         "fd_reserve"}};
    static_assert(kTenantLimits.covers(TenantLimit::FdReserve));
    /// The label values of `rejections`, in Rejection order.
    static std::array<std::string_view, kRejectionKinds> rejection_names();

    Metrics();
    Metrics(const Metrics&) = delete;
    Metrics& operator=(const Metrics&) = delete;

    /// First, so that every family below can register in it.
    Registry registry;

    Single<Counter> requests{registry,
                             {"aclaim_requests_total", "Frames received on the ROUTER socket."}};
    Single<Counter> claims{registry, {"aclaim_claims_total", "CLAIMs answered with ASSIGNED."}};
    Single<Counter> jobs_assigned{
        registry, {"aclaim_jobs_assigned_total", "Jobs handed out in ASSIGNED replies."}};
    Single<Counter> no_work{registry, {"aclaim_no_work_total", "CLAIMs answered with NO_WORK."}};
    Single<Counter> parked{
        registry, {"aclaim_claims_parked_total", "Times a CLAIM was parked to wait for work."}};
    Single<Counter> renewals{registry, {"aclaim_renewals_total", "RENEWs answered with LEASE."}};
    Single<Counter> renew_messages{
        registry,
        {"aclaim_renew_messages_total",
         "RENEW messages received that decoded: one per held job per heartbeat, or (protocol "
         "1.3, renew_held) one per heartbeat for all of a worker's jobs."}};
    Single<Counter> renew_jobs{
        registry,
        {"aclaim_renew_jobs_total",
         "Jobs named by the RENEW messages received (their own job and their held ones)."}};
    Single<Counter> completions{
        registry, {"aclaim_completions_total", "COMPLETEs accepted, replays included."}};
    Single<Counter> failures{registry, {"aclaim_failures_total", "FAILs accepted."}};
    Single<Counter> releases{registry,
                             {"aclaim_releases_total",
                              "RELEASEs accepted, and assignments released because "
                              "ASSIGNED was undeliverable."}};
    Single<Counter> progress_reports{
        registry,
        {"aclaim_progress_total", "PROGRESS reports stored (protocol 1.5, feature progress)."}};
    Single<Counter> jobs_parked{
        registry,
        {"aclaim_jobs_parked_total",
         "PARKs accepted: jobs handed to an outside system (protocol 1.6, feature park)."}};
    Single<Counter> parks_expired{
        registry,
        {"aclaim_parks_expired_total",
         "Parked jobs whose park's deadline passed, ended by the reaper as failed attempts."}};
    /// Written by the HTTP server's POST /v1/callback, which holds the metrics const.
    mutable Single<Counter> callbacks_accepted{
        registry,
        {"aclaim_park_callbacks_accepted_total",
         "Callbacks on POST /v1/callback that finished a parked job."}};
    mutable Single<Counter> callbacks_refused{
        registry,
        {"aclaim_park_callbacks_refused_total",
         "Callbacks on POST /v1/callback refused: a forged, replayed or stale token, or a "
         "malformed request."}};
    Single<Counter> replayed{
        registry,
        {"aclaim_replayed_total", "Accepted transitions that had already been committed."}};
    Single<Counter> reclaims{registry,
                             {"aclaim_reclaims_total", "Expired leases the reaper took back."}};
    Single<Counter> revocations{
        registry,
        {"aclaim_lease_revocations_total",
         "REVOKED sent: a renewal refused or a reclaim pushed to its holder."}};
    Single<Counter> replies_dropped{
        registry, {"aclaim_replies_dropped_total", "Replies whose peer was gone or not reading."}};
    Single<Counter> accept_failures{
        registry,
        {"aclaim_accept_failures_total",
         "Worker connections the ROUTER could not accept (errno from accept(), most often "
         "EMFILE: the process is at its descriptor limit)."}};
    Named<Counter, TenantLimit, 5> tenant_limit_refusals{
        registry,
        {"aclaim_tenant_limit_refusals_total",
         "HELLOs and CLAIMs answered overloaded, and handshakes refused, at a per-key or "
         "per-organization limit, by limit.",
         "limit"},
        kTenantLimits};
    void count_limit(TenantLimit limit) {
        tenant_limit_refusals[limit].fetch_add(1, std::memory_order_relaxed);
    }
    Single<Counter> db_deadline_answers{
        registry,
        {"aclaim_db_deadline_answers_total",
         "Requests answered by the coordinator itself because the database had not "
         "answered by the deadline."}};
    Single<Counter> mixed_batches{
        registry,
        {"aclaim_mixed_transactions_total",
         "Transactions that committed completions and claims together (one commit for both)."}};
    Single<Counter> db_connections_abandoned{
        registry,
        {"aclaim_db_connections_abandoned_total",
         "Database connections cut because a statement on them passed its deadline."}};
    /// REJECTED/REVOKED, by Rejection.
    Labelled<Counter, kRejectionKinds> rejections{
        registry,
        {"aclaim_rejections_total", "RENEW, COMPLETE, FAIL and RELEASE refused, by reason.",
         "reason"},
        rejection_names()};
    Labelled<Counter, proto::errors::kCounted.size()> errors{
        registry,
        {"aclaim_errors_total", "ERROR replies, by code.", "code"},
        proto::errors::kCounted};
    /// The ZAP handler's counters; kept here so that /metrics can serve them from the start.
    AuthCounters auth{registry};

    Single<Gauge> connected_sessions{
        registry, {"aclaim_connected_workers", "Worker sessions currently open."}};
    Single<Counter> listener_starts{
        registry,
        {"aclaim_listener_starts_total",
         "Times the listener started listening (its first connect and each reconnect); each "
         "sends every parked claim back to the database once."}};
    Single<Gauge> claims_waiting{
        registry,
        {"aclaim_claims_waiting", "CLAIMs parked now, waiting for work or their wait's end."}};
    Single<Gauge> db_queued{registry,
                            {"aclaim_db_queued_requests",
                             "Requests waiting for a database thread, sampled every second."}};
    Single<Gauge> db_in_flight{
        registry,
        {"aclaim_db_in_flight_requests",
         "Requests handed to the database threads and not yet answered, sampled every "
         "second."}};

    /// What retention did, as the retention thread of this coordinator saw it (only the holder of
    /// the retention lock prunes).
    Named<Counter, PrunedState, 4> pruned_jobs{
        registry,
        {"aclaim_retention_pruned_jobs_total",
         "Finished jobs this coordinator's retention removed (with their results), by "
         "the state they had finished in.",
         "state"},
        kPrunedStates};
    Single<Counter> pruned_results{registry,
                                   {"aclaim_retention_pruned_results_total",
                                    "job_results rows removed with their pruned jobs."}};
    Family retention_passes_family{
        registry,
        Type::Counter,
        {"aclaim_retention_passes_total",
         "Retention passes: run (this coordinator held the retention lock) or idle "
         "(another coordinator held it).",
         "outcome"}};
    Counter retention_passes{retention_passes_family, "run"};
    Counter retention_passes_idle{retention_passes_family, "idle"};
    /// What this coordinator's scheduler enqueued (every coordinator runs one; each tick is
    /// enqueued by one of them).
    Single<Counter> schedule_jobs{registry,
                                  {"aclaim_schedule_jobs_enqueued_total",
                                   "Jobs this coordinator's scheduler enqueued for schedule "
                                   "ticks."}};
    Single<Counter> partitions_created{
        registry,
        {"aclaim_event_partitions_created_total",
         "Monthly job_events partitions this coordinator created ahead of time."}};
    /// As read at the end of the last pass; -1 before the first.
    Named<Gauge, PartitionState, 4> partitions{
        registry,
        {"aclaim_event_partitions",
         "job_events partitions by state (archived and dropped ones went through "
         "aclaimctl retention archive), as of the last retention pass; -1 before it.",
         "state"},
        kPartitionStates};
    /// Seconds since the epoch at which the last attached partition ends (0: unknown).
    Single<Gauge> partitions_cover_until_s{
        registry,
        {"aclaim_event_partitions_cover_until_seconds",
         "End of the last attached job_events partition, seconds since the epoch: an "
         "event stamped later has no partition (alert well before)."}};

    /// A CLAIM from its hand-over to a DB thread until its outcome is back on the router thread:
    /// queue wait, statement, commit and mailbox, without any long-poll parking.
    Single<HistogramSeries> claim_latency{
        registry,
        {"aclaim_claim_duration_seconds",
         "A CLAIM from its hand-over to a database thread until its outcome is back on "
         "the router thread (queue wait, statement, commit), long-poll parking "
         "excluded."}};
    Named<Histogram, ClaimStage, 4> claim_stages{
        registry,
        {"aclaim_claim_stage_duration_seconds",
         "Where a granted CLAIM's time went: queue_wait (for a database thread), "
         "statement (up to the commit), commit (the WAL flush; 0 for a transaction sent "
         "in one message with its COMMIT, which the statement stage then holds), reply "
         "(until ASSIGNED left).",
         "stage"},
        kClaimStages};
    /// One store call, by Statement.
    Named<Histogram, Statement, 9> statement_latency{
        registry,
        {"aclaim_statement_duration_seconds",
         "One store call on a database thread or the reaper, by statement.", "statement"},
        kStatements};

    ResultNotifierCounters results{registry};
    NotificationCounters notifications{registry};

    /// Steady-clock nanoseconds of the router thread's last housekeeping; 0 before it serves.
    /// Not exported: /healthz reads it.
    std::atomic<std::int64_t> router_tick_ns{0};

    void count_rejection(store::Rejection r);
    void count_error(std::string_view code);
    std::uint64_t rejections_of(store::Rejection r) const;
    std::uint64_t errors_of(std::string_view code) const;

    /// One line with every non-zero counter, for the log at exit.
    std::string summary() const;
};

}  // namespace aclaim::coordinator::metrics

namespace aclaim::coordinator {
// The coordinator's threads name these unqualified, as they did when they lived in its namespace.
using metrics::AuthCounters;
using metrics::Histogram;
using metrics::LatencyClock;
using metrics::Metrics;
using metrics::NotificationCounters;
using metrics::ResultNotifierCounters;
}  // namespace aclaim::coordinator
