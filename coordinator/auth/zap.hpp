#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>
#include <zmq.hpp>

#include "common/base/clock.hpp"
#include "common/store/assignment.hpp"
#include "coordinator/db/connections.hpp"
#include "coordinator/metrics/metrics.hpp"
#include "coordinator/options.hpp"

namespace aclaim::coordinator {

class ConnectionBudget;
class Mailbox;
class Poster;

/// Who a CURVE public key belongs to, as registered in worker_keys.
struct KeyIdentity {
    store::OrgId org_id = 0;
    std::string name;
    /// The only queues the key's worker may serve, comma-separated; empty: any. Travels with
    /// every message as the ZAP metadata property ZapHandler::kQueuesProperty.
    std::string queues;

    /// The ZAP User-Id: "<org_id>:<name>", what every message of the connection carries.
    std::string user_id() const;
    /// The inverse of user_id(); nothing for a malformed text.
    static std::optional<KeyIdentity> parse(std::string_view user_id);
};

/// The ZeroMQ authentication handler (RFC 27 ZAP) for the coordinator's CURVE ROUTER: a socket on
/// inproc://zeromq.zap.01 served by a thread of its own, so a slow key lookup never holds up the
/// router thread. Handshakes waiting together are answered together, their keys looked up in one
/// query. Accepted keys are cached for `cache_ttl`; a miss always asks the database,
/// so a newly registered key works at once and a revoked one is refused by new handshakes within
/// the TTL.
///
/// Connections already open are watched too: every key this handler has accepted is re-checked
/// against worker_keys every `cache_ttl` (at most kMaxRechecksPerSecond times a second), and the
/// set of those that are no longer live is posted to the router thread (a KeysRevoked event)
/// whenever it changes. The router thread then cuts off the sessions of those connections. The
/// key travels with every message as the ZAP metadata property kKeyProperty.
class ZapHandler {
  public:
    /// The message property (zmq_msg_gets) that carries the connection's client public key, Z85.
    static constexpr const char* kKeyProperty = "X-Public-Key";
    static constexpr const char* kQueuesProperty = "X-Queues";
    static constexpr int kMaxRechecksPerSecond = 20;

    /// Binds the ZAP endpoint on `context` at once: it must exist before the ROUTER accepts.
    /// `counters` and `clock` (whose monotonic time ages cached keys and paces re-checks) must
    /// outlive the handler.
    /// Worker keys are looked up on a connection from `connections` (which must outlive the
    /// handler too), as the login: the lookups span every organization.
    ZapHandler(zmq::context_t& context, const ZapOptions& options, const Connections& connections,
               AuthCounters& counters, const base::Clock& clock);
    ~ZapHandler();
    ZapHandler(const ZapHandler&) = delete;
    ZapHandler& operator=(const ZapHandler&) = delete;

    /// Starts the thread. Revocations are posted to `mailbox`; without one, open connections are
    /// not re-checked.
    void start(Mailbox* mailbox);
    void stop();

    const AuthCounters& counters() const { return counters_; }
    /// Once the worker connections leave only the descriptor reserve, a handshake of a key that
    /// has a session already is refused (ConnectionBudget::admits). Call before start(); the
    /// budget must outlive the handler.
    void set_budget(ConnectionBudget* budget) { budget_ = budget; }

  private:
    struct Cached {
        KeyIdentity identity;
        std::chrono::steady_clock::time_point fetched_at;
    };
    enum class Verdict { Accepted, Refused, Failed };

    void serve(Mailbox* mailbox);
    /// Answers every handshake waiting (up to a bound), looking up their uncached keys at once.
    void answer_batch();
    /// The verdict on one key: from the cache, or from `found` (the looked-up owners of the
    /// batch's uncached keys; `lookup_failed` when that lookup could not be made).
    Verdict check(const std::string& public_key_z85,
                  const std::unordered_map<std::string, KeyIdentity>& found, bool lookup_failed,
                  base::MonotonicTime now, KeyIdentity& identity);
    /// The live owners among `keys`, Z85, in one query.
    std::unordered_map<std::string, KeyIdentity> look_up(const std::vector<std::string>& keys);
    /// Asks worker_keys which watched keys are still live; posts the others when they changed.
    void recheck(Poster& poster);
    pqxx::connection& connection();

    const Connections& connections_;
    std::chrono::milliseconds cache_ttl_;
    zmq::socket_t socket_;
    std::unique_ptr<pqxx::connection> conn_;         ///< ZAP thread only; reopened after a failure
    std::unordered_map<std::string, Cached> cache_;  ///< ZAP thread only
    /// Every key accepted since start, for the re-check. ZAP thread only.
    std::unordered_map<std::string, KeyIdentity> watched_;
    /// The watched keys found not live by the last re-check, as last posted. ZAP thread only.
    std::vector<std::string> revoked_;
    AuthCounters& counters_;
    ConnectionBudget* budget_ = nullptr;
    const base::Clock& clock_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

/// The Z85 public key of a Z85 secret key; throws std::invalid_argument if it is not one.
std::string curve_public_of(const std::string& secret_z85);

}  // namespace aclaim::coordinator
