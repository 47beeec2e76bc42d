#pragma once

// Every code an ERROR reply can carry, in one place: the codec's (decode() refusing a message),
// the coordinator's own, and which of them a client may simply send again. The coordinator, the
// worker client, the tests and docs/protocol.md all name these and nothing else.

#include <algorithm>
#include <array>
#include <string>
#include <string_view>

#include "common/proto/protocol.hpp"

namespace aclaim::proto::errors {

// ---- from the codec: the message could not be taken as a request ----

/// Not three frames after the routing id.
inline constexpr std::string_view kMalformed = "malformed";
/// The body is larger than the coordinator accepts (max_body_bytes in WELCOME).
inline constexpr std::string_view kOversized = "oversized";
/// The tag frame is not a protocol version this coordinator speaks.
inline constexpr std::string_view kWrongVersion = "wrong_version";
/// The type frame names no message of the protocol.
inline constexpr std::string_view kUnknownType = "unknown_type";
/// The body could not be read in the tag's encoding.
inline constexpr std::string_view kUndecodable = "undecodable";
/// The body was read but a field is out of its range, or the message is not a request.
inline constexpr std::string_view kInvalid = "invalid";

// ---- from the coordinator ----

/// A request other than HELLO arrived on a connection without a session.
inline constexpr std::string_view kNoSession = "no_session";
/// The session already has the maximum number of outstanding requests.
inline constexpr std::string_view kTooManyRequests = "too_many_requests";
/// The DB threads are this far behind; the request was not attempted.
inline constexpr std::string_view kOverloaded = "overloaded";
/// No database connection; the request was not attempted.
inline constexpr std::string_view kDatabaseUnavailable = "database_unavailable";
/// The database refused the statement; it was rolled back.
inline constexpr std::string_view kDatabaseError = "database_error";
/// The connection broke around a commit and the row shows it did not happen: safe to re-send.
inline constexpr std::string_view kNotCommitted = "not_committed";
/// The connection broke around a commit and its outcome could not be learned.
inline constexpr std::string_view kOutcomeUnknown = "outcome_unknown";
/// The coordinator is shutting down.
inline constexpr std::string_view kDraining = "draining";
/// The request does not match the connection's authenticated identity.
inline constexpr std::string_view kUnauthenticated = "unauthenticated";
/// The connection's CURVE key was revoked while it was open: its session is closed and nothing
/// more is done for it. Not retryable: the key will not come back.
inline constexpr std::string_view kKeyRevoked = "key_revoked";

/// HELLO named a queue that the connection's key may not serve (aclaimctl keys add --queues).
inline constexpr std::string_view kQueueNotAllowed = "queue_not_allowed";

/// The REVOKED reason pushed when the reaper took an expired lease back (the other REVOKED and
/// REJECTED reasons are the store's Rejection names, "cancelled" and "deadline_exceeded" among
/// them).
inline constexpr std::string_view kReclaimed = "reclaimed";

/// Every code counted separately by the coordinator's metrics; anything else counts as "other".
inline constexpr std::array<std::string_view, 18> kCounted{
    kMalformed,     kOversized,       kWrongVersion,    kUnknownType, kUndecodable,
    kInvalid,       kNoSession,       kTooManyRequests, kOverloaded,  kDatabaseUnavailable,
    kDatabaseError, kNotCommitted,    kOutcomeUnknown,  kDraining,    kUnauthenticated,
    kKeyRevoked,    kQueueNotAllowed, "other"};

/// Codes after which the request had no effect (or an unknown one that a re-send settles), so
/// the same request may simply be sent again later.
inline bool retryable(std::string_view code) {
    static constexpr std::array<std::string_view, 6> kCodes = {kOverloaded,    kDatabaseUnavailable,
                                                               kDatabaseError, kTooManyRequests,
                                                               kNotCommitted,  kOutcomeUnknown};
    return std::find(kCodes.begin(), kCodes.end(), code) != kCodes.end();
}

/// Makes a text fit for reasons and details: at most kMaxTextBytes (a database message, for one,
/// can be longer) and valid UTF-8 (JSON replies must be), because a reply the worker cannot
/// decode helps nobody.
inline std::string clip_text(const std::string& text) {
    return valid_utf8_text(text, kMaxTextBytes);
}

}  // namespace aclaim::proto::errors
