#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "common/base/clock.hpp"
#include "coordinator/http/callback_limiter.hpp"

namespace aclaim::coordinator {

/// What POST /v1/callback was sent.
struct CallbackRequest {
    std::string authorization;  ///< the Authorization header
    std::string body;
    std::string peer;  ///< who called (address:port); limited and audited by its address
};

/// What POST /v1/callback answers: an HTTP status and a JSON body.
struct CallbackReply {
    int status = 500;
    std::string body;  ///< one JSON object
    bool accepted = false;
    /// With 429: the Retry-After header, in seconds; 0: no header.
    int retry_after_s = 0;
};

/// The outside system's callback over HTTP (protocol 1.6, docs/integration.md): the token of a
/// parked job as a bearer credential, the outcome in a small JSON body, decided by the same
/// fenced SQL function as the SQL API (aclaim_finish_parked,
/// schema/definitions/functions/aclaim_finish_parked.sql), on connections of its own so that a
/// callback never waits behind a DB thread's work. A refused token is audited by that function
/// (job_events, or one counted row per source, reason and hour in park_refusal_counts for one that
/// names no job, schema/baseline/tables.sql).
///
/// What a flood of forged callbacks costs: nothing of the database once its source has spent its
/// refusals (CallbackLimiter: 429 with Retry-After, before the body is read), at most
/// kMaxConnections connections however many arrive, reused from call to call, and no row per
/// call. A refusal's answer never carries the database's own text: the detail is logged here.
class ParkCallback {
  public:
    /// Bounds connecting, the statement, and the wait for a free connection.
    static constexpr int kTimeoutSeconds = 5;
    /// The largest body read: an outcome and a result reference of at most 4 KiB, in JSON.
    static constexpr std::size_t kMaxBodyBytes = 8192;
    /// The largest result reference (or failure reason) aclaim_finish_parked takes.
    static constexpr std::size_t kMaxResultBytes = 4096;
    /// Connections callbacks hold at most at once; more callbacks at once wait for one.
    static constexpr int kMaxConnections = 2;

    /// `clock` gives the callback's time and must outlive this object.
    ParkCallback(const std::string& dsn, const base::Clock& clock, CallbackLimits limits = {});
    ~ParkCallback();
    ParkCallback(const ParkCallback&) = delete;
    ParkCallback& operator=(const ParkCallback&) = delete;

    /// Decides one callback. Thread-safe: concurrent calls share the connections.
    CallbackReply handle(const CallbackRequest& request);

    /// Connections opened since construction (a broken one is replaced by a new one).
    std::int64_t connections_opened() const;

  private:
    /// A connection taken from the idle ones, or a new one while fewer than kMaxConnections
    /// are open; none when none came free within kTimeoutSeconds.
    std::unique_ptr<pqxx::connection> take();
    /// Returns a connection taken; a broken one (or none) frees its place.
    void give_back(std::unique_ptr<pqxx::connection> conn);
    CallbackReply decide(pqxx::connection& conn, const std::string& token,
                         const std::string& outcome, const std::string& result,
                         const std::string& peer);

    std::string dsn_;
    const base::Clock& clock_;
    CallbackLimiter limiter_;

    mutable std::mutex mutex_;
    std::condition_variable freed_;
    std::vector<std::unique_ptr<pqxx::connection>> idle_;
    int open_ = 0;
    std::int64_t opened_ = 0;
};

}  // namespace aclaim::coordinator
