#pragma once

// What crosses between the router thread and the threads that talk to PostgreSQL. Requests go
// down through the WorkQueue; outcomes and database news come back through the Mailbox.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "common/store/assignment.hpp"

namespace aclaim::coordinator {

using SteadyClock = std::chrono::steady_clock;

enum class RequestKind { Claim, Renew, Complete, Fail, Release, Progress, Park };

constexpr std::string_view kind_name(RequestKind k) {
    constexpr std::string_view kNames[] = {"claim",   "renew",    "complete", "fail",
                                           "release", "progress", "park"};
    return kNames[static_cast<int>(k)];
}

/// What a request asks of the store, in the store's terms. The router builds it from a wire
/// message and the session it came on (the organization and the worker are the session's, never
/// the body's); the coordinator builds its own releases with release_of(). The DB threads read
/// nothing else of a request.
struct StoreRequest {
    RequestKind kind = RequestKind::Claim;
    store::OrgId org_id = 0;
    std::string worker_id{};
    std::vector<std::string> queues{};  ///< the queues the session serves (sorted, each once)
    int max_jobs = 1;                   ///< claim only
    /// Renew, complete, fail and release: the job and the generation that fences it; 0 for a
    /// claim, which names no job.
    store::JobId job_id = 0;
    store::Generation generation = 0;
    std::string result_ref{};          ///< complete only
    std::string reason{};              ///< fail only
    bool retryable = false;            ///< fail only
    int percent = 0;                   ///< progress only
    std::string note{};                ///< progress only
    std::string checkpoint{};          ///< progress only
    std::int64_t park_timeout_ms = 0;  ///< park only: the deadline is the DB thread's now + this
    std::string token{};               ///< park only: the callback token the worker is given

    /// The coordinator's own release of a lease it could not deliver to `worker`.
    static StoreRequest release_of(store::OrgId org, std::string worker,
                                   const store::Lease& lease) {
        StoreRequest r;
        r.kind = RequestKind::Release;
        r.org_id = org;
        r.worker_id = std::move(worker);
        r.job_id = lease.job_id;
        r.generation = lease.generation;
        return r;
    }

    store::ClaimRequest claim() const { return {worker_id, max_jobs, queues}; }
    /// Renew, complete, fail, release or progress: the fence and the fields the operation
    /// carries.
    store::TransitionRequest transition() const {
        return {org_id,    job_id,  generation, worker_id,  result_ref,      reason,
                retryable, percent, note,       checkpoint, base::Instant{}, token};
    }
    /// Renew, complete, fail, release or progress.
    store::Operation operation() const {
        switch (kind) {
            case RequestKind::Complete:
                return store::Operation::Complete;
            case RequestKind::Fail:
                return store::Operation::Fail;
            case RequestKind::Release:
                return store::Operation::Release;
            case RequestKind::Progress:
                return store::Operation::Progress;
            case RequestKind::Park:
                return store::Operation::Park;
            case RequestKind::Claim:
            case RequestKind::Renew:
                break;
        }
        return store::Operation::Renew;
    }
};

/// Where a request stands between the router thread, which may answer it itself once its
/// deadline passes, and the DB thread that takes it. Each side moves it once, with a
/// compare-exchange from Queued, so that exactly one of them decides whether it reaches the
/// database: a request answered "nothing was attempted" is never run afterwards.
enum class Stage : std::uint8_t {
    Queued,    ///< waiting for a DB thread
    Started,   ///< a DB thread took it; its statement may have run
    Answered,  ///< the router answered it at its deadline before any DB thread took it
};

/// One request for a DB thread: what to ask the store, and how the router keeps track of it.
/// Whom to answer and how stays with the router (router/routed_request.hpp).
struct DbRequest {
    StoreRequest ask;
    /// False for work the coordinator does on its own behalf (releasing an assignment whose
    /// ASSIGNED could not be delivered): the outcome is logged, not sent.
    bool answer = true;
    /// A claim that rides on the completion queued just before it (COMPLETE's `next`, protocol
    /// 1.2): the WorkQueue hands the two out together, so that one transaction commits both and
    /// the completion's answer goes out first. A claim dispatched again after its long-poll wait
    /// stands alone.
    bool follows = false;
    /// The renewals of one RENEW that names several jobs (its `held`, protocol 1.3) share a
    /// group, the ticket of its first: the WorkQueue hands a group out whole, so that its jobs
    /// are renewed in one statement. 0: on its own.
    std::uint64_t group = 0;
    /// When this attempt was handed to the DB threads, for the claim latency histogram (on the
    /// LatencyClock, as every latency is).
    SteadyClock::time_point dispatched_at{};
    /// Set by the dispatcher for a request it must answer by a deadline (0: none, as for work on
    /// the coordinator's own behalf), so that a late outcome can be told apart.
    std::uint64_t ticket = 0;
    std::shared_ptr<std::atomic<Stage>> stage;
    /// When a DB thread took it and finished with it, and how long the commit took: with
    /// dispatched_at, where a claim's time went (Metrics::claim_stages).
    struct DbTimings {
        SteadyClock::time_point taken{};
        SteadyClock::time_point finished{};
        SteadyClock::duration commit{};
    } timings;

    RequestKind kind() const { return ask.kind; }
};

/// A request the database's authority could not answer, and why. The router chooses the wire
/// code for each kind where it encodes the reply (Replier::wire_code).
struct DbFailure {
    enum class Kind {
        Unavailable,     ///< no connection, or no answer in time, and nothing was committed
        Error,           ///< the statement failed and its transaction rolled back
        OutcomeUnknown,  ///< the commit may or may not have happened; the row decides a re-send
        NotCommitted,    ///< the row shows the interrupted commit did not happen
    };
    Kind kind = Kind::Unavailable;
    std::string text;
};

/// The answer to a request the database has not answered within `bound` (--db-deadline-ms): the
/// one rule for both the router, which answers at the deadline without the database, and a DB
/// thread whose statement the watchdog cut at the same deadline. `attempted`: a DB thread took
/// the request, so its statement may have run. A claim or a renewal changes nothing a worker
/// relies on whether or not it ran (a claimed job is reclaimed, a renewal is idempotent); any
/// other transition that may have run is for the row to decide when the worker re-sends. A
/// progress report is as safe to re-send as a renewal: the same report stored twice is one row;
/// so is a PARK, which parks the job again under the same token.
inline DbFailure answer_at_deadline(RequestKind kind, bool attempted,
                                    std::chrono::milliseconds bound) {
    const std::string within =
        "the database did not answer within " + std::to_string(bound.count()) + " ms";
    if (!attempted) return {DbFailure::Kind::Unavailable, within + "; nothing was attempted"};
    if (kind == RequestKind::Claim || kind == RequestKind::Renew || kind == RequestKind::Progress ||
        kind == RequestKind::Park) {
        return {DbFailure::Kind::Unavailable, within + "; re-send"};
    }
    return {DbFailure::Kind::OutcomeUnknown,
            within +
                " while the statement was under way; re-send the same request, the job's row "
                "decides it"};
}

struct RequestOutcome {
    using Result = std::variant<store::ClaimOutcome, store::Transition, DbFailure>;
    DbRequest request;
    Result result;
};

/// A committed job notification for an organization's queue arrived (all queues when empty).
struct OrgWoken {
    store::OrgId org_id = 0;
    std::string queue;
};

/// The listener (re)started listening; notifications before this moment may have been missed.
struct ListenerReady {};

/// The ZAP handler's latest re-check: every key it had accepted that worker_keys no longer holds
/// as live. Replaces the previous set; connections under these keys are cut off.
struct KeysRevoked {
    std::vector<std::string> keys;
};

using Event = std::variant<RequestOutcome, store::Reclaimed, OrgWoken, ListenerReady, KeysRevoked>;

}  // namespace aclaim::coordinator
