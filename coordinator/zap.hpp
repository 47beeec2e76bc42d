#pragma once

#include <pqxx/pqxx>
#include <zmq.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>

#include "common/assignment.hpp"

namespace aclaim::coordinator {

/// Who a CURVE public key belongs to, as registered in worker_keys.
struct KeyIdentity {
    common::OrgId org_id = 0;
    std::string name;

    /// The ZAP User-Id: "<org_id>:<name>", what every message of the connection carries.
    std::string user_id() const;
    /// The inverse of user_id(); nothing for a malformed text.
    static std::optional<KeyIdentity> parse(std::string_view user_id);
};

/// Handshakes answered, by outcome. Written by the ZAP thread, read by anyone.
struct AuthCounters {
    std::atomic<std::uint64_t> accepted{0};  ///< 200: a live registered key
    std::atomic<std::uint64_t> refused{0};   ///< 400: unknown or revoked key, or not CURVE
    std::atomic<std::uint64_t> failed{0};    ///< 500: the key could not be looked up
    std::atomic<std::uint64_t> lookups{0};   ///< worker_keys queries (cache misses and refreshes)
};

/// The ZeroMQ authentication handler (RFC 27 ZAP) for the coordinator's CURVE ROUTER: a REP socket
/// on inproc://zeromq.zap.01 served by a thread of its own, so a slow key lookup never holds up
/// the router thread. Accepted keys are cached for `cache_ttl`; a miss always asks the database,
/// so a newly registered key works at once and a revoked one is refused by new handshakes within
/// the TTL. Connections already established stay up until they disconnect.
class ZapHandler {
public:
    /// Binds the ZAP endpoint on `context` at once: it must exist before the ROUTER accepts.
    ZapHandler(zmq::context_t& context, std::string dsn, std::chrono::milliseconds cache_ttl);
    ~ZapHandler();
    ZapHandler(const ZapHandler&) = delete;
    ZapHandler& operator=(const ZapHandler&) = delete;

    void start();
    void stop();

    const AuthCounters& counters() const { return counters_; }

private:
    struct Cached {
        KeyIdentity identity;
        std::chrono::steady_clock::time_point fetched_at;
    };
    enum class Verdict { Accepted, Refused, Failed };

    void serve();
    void answer_one();
    Verdict check(const std::string& public_key_z85, KeyIdentity& identity);
    std::optional<KeyIdentity> look_up(const std::string& public_key_z85);

    std::string dsn_;
    std::chrono::milliseconds cache_ttl_;
    zmq::socket_t socket_;
    std::unique_ptr<pqxx::connection> conn_;  ///< ZAP thread only; reopened after a failure
    std::unordered_map<std::string, Cached> cache_;  ///< ZAP thread only
    AuthCounters counters_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
};

/// The Z85 public key of a Z85 secret key; throws std::invalid_argument if it is not one.
std::string curve_public_of(const std::string& secret_z85);

}  // namespace aclaim::coordinator
