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

#include "common/proto/protocol.hpp"
#include "common/store/assignment.hpp"

namespace aclaim::coordinator {

namespace proto = common::proto;

using SteadyClock = std::chrono::steady_clock;

/// Who asked and how to answer, carried with a request through a DB thread and back.
struct Requester {
    std::string routing_id;
    proto::Encoding encoding = proto::Encoding::Binary;
    std::uint64_t req = 0;
    common::OrgId org_id = 0;           ///< from the session, never from the body
    std::string worker_id;              ///< from the session
    std::string public_key;             ///< the connection's CURVE key (Z85); empty in plaintext
    std::vector<std::string> queues{};  ///< the queues the session serves (sorted, each once)
};

/// The order of the alternatives matches RequestKind.
using RequestBody =
    std::variant<proto::Claim, proto::Renew, proto::Complete, proto::Fail, proto::Release>;
enum class RequestKind { Claim, Renew, Complete, Fail, Release };

inline std::string_view kind_name(RequestKind k) {
    constexpr std::string_view kNames[] = {"claim", "renew", "complete", "fail", "release"};
    return kNames[static_cast<int>(k)];
}

/// Where a request stands between the router thread, which may answer it itself once its
/// deadline passes, and the DB thread that takes it. Each side moves it once, with a
/// compare-exchange from Queued, so that exactly one of them decides whether it reaches the
/// database: a request answered "nothing was attempted" is never run afterwards.
enum class Stage : std::uint8_t {
    Queued,    ///< waiting for a DB thread
    Started,   ///< a DB thread took it; its statement may have run
    Answered,  ///< the router answered it at its deadline before any DB thread took it
};

/// One request for a DB thread.
struct DbRequest {
    Requester from;
    RequestBody body;
    /// False for work the coordinator does on its own behalf (releasing an assignment whose
    /// ASSIGNED could not be delivered): the outcome is logged, not sent.
    bool answer = true;
    /// CLAIM only: when its long-poll ends.
    SteadyClock::time_point wait_until{};
    /// CLAIM only: the organization's wake count when this attempt was dispatched, so that a
    /// notification that raced with an empty claim is not lost.
    std::uint64_t wake_seq = 0;
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

    RequestKind kind() const { return static_cast<RequestKind>(body.index()); }
};

/// A request that could not be answered from the database's authority: the ERROR code to send
/// (errors.hpp) and why.
struct Failure {
    std::string code;
    std::string text;
};

struct RequestOutcome {
    using Result = std::variant<common::ClaimOutcome, common::Transition, Failure>;
    DbRequest request;
    Result result;
};

/// A committed job notification for an organization's queue arrived (all queues when empty).
struct OrgWoken {
    common::OrgId org_id = 0;
    std::string queue;
};

/// The listener (re)started listening; notifications before this moment may have been missed.
struct ListenerReady {};

/// The ZAP handler's latest re-check: every key it had accepted that worker_keys no longer holds
/// as live. Replaces the previous set; connections under these keys are cut off.
struct KeysRevoked {
    std::vector<std::string> keys;
};

using Event = std::variant<RequestOutcome, common::Reclaimed, OrgWoken, ListenerReady, KeysRevoked>;

}  // namespace aclaim::coordinator
