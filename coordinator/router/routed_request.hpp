#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/proto/protocol.hpp"
#include "coordinator/db/events.hpp"

namespace aclaim::coordinator {

/// Whom to answer and how: the connection a request came on, the `req` to echo and the encoding
/// it used. The router's alone; the DB threads never see it.
struct ReplyTo {
    std::string routing_id;
    proto::Encoding encoding = proto::Encoding::Binary;
    std::uint64_t req = 0;
    std::string public_key;  ///< the connection's CURVE key (Z85); empty in plaintext
    /// Whether answering it frees one of the session's outstanding places. A RENEW that names
    /// several jobs (protocol 1.3) takes one place however many it names: its own job's answer
    /// frees it, the answers of its `held` jobs free none.
    bool counted = true;
};

/// A worker's request on the router thread: the domain request that goes down to a DB thread,
/// the reply address that stays up here, and a claim's long-poll.
struct RoutedRequest {
    ReplyTo reply;
    DbRequest db;
    /// CLAIM only: the long-poll budget it asked for, and when it ends.
    int wait_ms = 0;
    SteadyClock::time_point wait_until{};
    /// CLAIM only: the organization's wake count when this attempt was dispatched, so that a
    /// notification that raced with an empty claim is not lost.
    std::uint64_t wake_seq = 0;
    /// CLAIM only, parked: when a rate limit's bucket that held it back has a token again, at
    /// which it is dispatched again if its wait has not ended (ClaimOutcome::refill_at).
    std::optional<SteadyClock::time_point> retry_at;
    /// CLAIM only: the count of leases ended on its queues (WakeCounter::slots) when this attempt
    /// was dispatched, so that a slot freed while it ran is not lost.
    std::uint64_t slot_seq = 0;
    /// CLAIM only, parked: it came back short while a served queue has a concurrency limit
    /// (ClaimOutcome::slot_bound), so a slot freed on one of its queues dispatches it again.
    bool slot_bound = false;

    const StoreRequest& ask() const { return db.ask; }
    RequestKind kind() const { return db.kind(); }
};

}  // namespace aclaim::coordinator
