#pragma once

#include <zmq.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/base/clock.hpp"
#include "coordinator/db/events.hpp"
#include "coordinator/http/metrics.hpp"
#include "coordinator/options.hpp"
#include "coordinator/router/parked_claims.hpp"
#include "coordinator/router/sessions.hpp"
#include "coordinator/db/work_queue.hpp"

namespace aclaim::coordinator {

class DbPool;
class Listener;
class Mailbox;
class Reaper;
class ZapHandler;
struct AuthCounters;

/// The ZeroMQ front end: one ROUTER socket served by one thread, which alone sends on it, in
/// front of the DB threads, the lease reaper and the job notification listener. Holds no
/// authority of its own: every decision is a store statement, so coordinators can be restarted
/// or run side by side on one database.
class Coordinator {
public:
    /// The clock decides lease times; it must outlive the coordinator.
    Coordinator(CoordinatorOptions options, const common::Clock& clock);
    ~Coordinator();
    Coordinator(const Coordinator&) = delete;
    Coordinator& operator=(const Coordinator&) = delete;

    /// Binds, then serves in a thread of its own. Throws if the options are unusable, the bind
    /// fails or requested migrations cannot be applied.
    void start();
    /// Binds if not yet bound, then serves in the calling thread until stopped and drained.
    void run();
    /// Asks the serving thread to drain and return. Safe from any thread; does not wait.
    void request_stop();
    /// request_stop(), then waits for the thread start() created.
    void stop();

    /// The endpoint actually bound, e.g. tcp://127.0.0.1:41234 for a bind on port *.
    const std::string& endpoint() const { return endpoint_; }
    const Metrics& metrics() const { return metrics_; }
    /// CURVE handshakes accepted and refused; nothing in plaintext mode.
    const AuthCounters* auth_counters() const;
    const CoordinatorOptions& options() const { return options_; }

private:
    // Life cycle (coordinator.cpp).
    void bind();
    void serve();
    void shutdown();
    std::chrono::milliseconds poll_timeout(SteadyClock::time_point now) const;
    void begin_drain();
    void housekeeping(SteadyClock::time_point now);

    /// What the transport says about the connection a message came on: under CURVE, the ZAP
    /// User-Id and the client's public key; both empty in plaintext mode.
    struct Credentials {
        std::string user_id;
        std::string public_key;
    };

    // Requests from workers (requests.cpp).
    void read_router();
    void handle_message(const std::string& routing_id, const Credentials& credentials,
                        const std::vector<std::string_view>& frames);
    void handle_request(const std::string& routing_id, const Credentials& credentials,
                        proto::Decoded decoded);
    void handle_hello(const std::string& routing_id, const Credentials& credentials,
                      const proto::Hello& hello, proto::Encoding encoding);
    void handle_bye(const std::string& routing_id);
    /// True when the ZAP handler's latest re-check found this key no longer live.
    bool key_revoked(const std::string& public_key) const;
    /// Closes the session of a connection whose key was revoked; its parked claims are answered
    /// ERROR key_revoked. Its leases are left alone: they expire and are reclaimed.
    void cut_off(const std::string& routing_id);
    void dispatch(DbRequest request);
    bool send(const std::string& routing_id, const proto::Message& message,
              proto::Encoding encoding);
    void send_error(const std::string& routing_id, proto::Encoding encoding, std::uint64_t req,
                    std::string_view code, std::string text);
    std::uint64_t wake_seq(common::OrgId org) const;

    // Outcomes and database news (outcomes.cpp).
    void process_events();
    void on_outcome(RequestOutcome& outcome);
    void on_claim(DbRequest& request, const RequestOutcome::Result& result);
    void on_transition(const DbRequest& request, const RequestOutcome::Result& result);
    void on_internal(const DbRequest& request, const RequestOutcome::Result& result);
    void on_reclaimed(const common::Reclaimed& reclaimed);
    void on_keys_revoked(const KeysRevoked& revoked);
    void wake(std::vector<DbRequest> claims);
    void answer_no_work(const DbRequest& claim, const std::string& reason);
    void release_undelivered(const DbRequest& claim, const common::ClaimOutcome& outcome);
    void finish(const Requester& from);

    CoordinatorOptions options_;
    const common::Clock& clock_;
    Metrics metrics_;

    zmq::context_t context_;
    std::unique_ptr<ZapHandler> zap_;  ///< before router_: it must outlive the ROUTER's handshakes
    zmq::socket_t router_;
    std::unique_ptr<Mailbox> mailbox_;
    WorkQueue queue_;
    std::unique_ptr<DbPool> pool_;
    std::unique_ptr<Reaper> reaper_;
    std::unique_ptr<Listener> listener_;
    std::string endpoint_;
    bool bound_ = false;

    // Router thread only.
    SessionTable sessions_;
    ParkedClaims parked_;
    /// Per organization, how many job notifications arrived; plus one epoch for every time the
    /// listener started listening, when any notification may have been missed.
    std::unordered_map<common::OrgId, std::uint64_t> wakes_;
    std::uint64_t listen_epoch_ = 0;
    /// The keys of open connections that are no longer live (KeysRevoked); empty in plaintext.
    std::unordered_set<std::string> revoked_keys_;
    std::size_t at_db_ = 0;  ///< requests handed to DB threads and not yet come back
    bool draining_ = false;
    bool queue_closed_ = false;
    SteadyClock::time_point drain_until_{};
    SteadyClock::time_point next_housekeeping_{};

    std::atomic<bool> stop_requested_{false};
    std::thread thread_;
};

}  // namespace aclaim::coordinator
