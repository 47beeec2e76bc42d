#pragma once

// The codes of ERROR replies the coordinator sends on its own account. Decoder codes (malformed,
// oversized, wrong_version, unknown_type, undecodable, invalid) come from the protocol codec.

#include <array>
#include <string>
#include <string_view>

#include "common/protocol.hpp"

namespace aclaim::coordinator::errors {

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

/// Every code counted separately by Metrics; anything else is counted as "other".
inline constexpr std::array<std::string_view, 17> kCounted{
    "malformed",          "oversized",        "wrong_version",   "unknown_type",
    "undecodable",        "invalid",          kNoSession,        kTooManyRequests,
    kOverloaded,          kDatabaseUnavailable, kDatabaseError,  kNotCommitted,
    kOutcomeUnknown,      kDraining,          kUnauthenticated,  kKeyRevoked,
    "other"};

/// Cuts a text to the size the protocol allows in reasons and details: a database message, for
/// one, can be longer, and a reply the worker cannot decode helps nobody.
inline std::string clip_text(std::string text) {
    if (text.size() > common::proto::kMaxTextBytes) text.resize(common::proto::kMaxTextBytes);
    return text;
}

}  // namespace aclaim::coordinator::errors
