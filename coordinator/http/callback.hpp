#pragma once

#include <string>

#include "common/base/clock.hpp"

namespace aclaim::coordinator {

/// What POST /v1/callback was sent.
struct CallbackRequest {
    std::string authorization;  ///< the Authorization header
    std::string body;
    std::string peer;  ///< who called (address:port), for the audit
};

/// What POST /v1/callback answers: an HTTP status and a JSON body.
struct CallbackReply {
    int status = 500;
    std::string body;  ///< one JSON object
    bool accepted = false;
};

/// The outside system's callback over HTTP (protocol 1.6, docs/integration.md): the token of a
/// parked job as a bearer credential, the outcome in a small JSON body, decided by the same
/// fenced SQL function as the SQL API (aclaim_finish_parked, schema/0023), on a short-lived
/// connection of its own so that a callback never waits behind a DB thread's work. A refused
/// token is audited by that function (job_events, or park_refusals for one that names no job).
class ParkCallback {
  public:
    /// Bounds connecting and the statement.
    static constexpr int kTimeoutSeconds = 5;
    /// The largest body read: an outcome and a result reference of at most 4 KiB, in JSON.
    static constexpr std::size_t kMaxBodyBytes = 8192;

    /// `clock` gives the callback's time and must outlive this object.
    ParkCallback(const std::string& dsn, const common::Clock& clock);

    /// Decides one callback. Thread-safe: each call has its own connection.
    CallbackReply handle(const CallbackRequest& request) const;

  private:
    std::string dsn_;
    const common::Clock& clock_;
};

}  // namespace aclaim::coordinator
