#pragma once

#include <string>
#include <string_view>
#include <vector>
#include <zmq.hpp>

#include "common/base/clock.hpp"
#include "coordinator/metrics/metrics.hpp"
#include "coordinator/options.hpp"
#include "coordinator/router/dispatcher.hpp"
#include "coordinator/router/parked_claims.hpp"
#include "coordinator/router/replier.hpp"
#include "coordinator/router/revocations.hpp"
#include "coordinator/router/sessions.hpp"
#include "coordinator/router/wake_counter.hpp"

namespace aclaim::coordinator {

/// The router thread's side of requests: reads frames off the ROUTER socket, decodes them, checks
/// the session and admission limits, and hands what passes to the Dispatcher. What it refuses it
/// answers through the Replier. Router thread only.
class Inbound {
  public:
    /// Everything it is handed must outlive it.
    struct Parts {
        zmq::socket_t& router;
        const common::Clock& clock;
        SessionTable& sessions;
        ParkedClaims& parked;
        Revocations& revocations;
        const WakeCounter& wakes;
        Dispatcher& dispatcher;
        Replier& replier;
        Metrics& metrics;
    };

    Inbound(const RouterOptions& options, Parts parts) : options_(options), p_(parts) {}

    /// Reads and handles the messages waiting on the socket, up to one round's worth; returns
    /// how many were read.
    int read();
    /// For the end of a drain, when nothing more goes to the database: from now on every request
    /// is answered `draining` (NO_WORK for a claim). Answers what is waiting on the socket, for
    /// at most a quarter of a second.
    void refuse_remaining();

  private:
    /// What the transport says about the connection a message came on: under CURVE, the ZAP
    /// User-Id and the client's public key; both empty in plaintext mode.
    struct Credentials {
        std::string user_id;
        std::string public_key;
        /// The key's queue limit, comma-separated; empty: any queue.
        std::string queues;
    };

    void handle_message(const std::string& routing_id, const Credentials& credentials,
                        const std::vector<std::string_view>& frames, std::size_t frame_count);
    void handle_request(const std::string& routing_id, const Credentials& credentials,
                        const proto::Decoded& decoded);
    void handle_hello(const std::string& routing_id, const Credentials& credentials,
                      const proto::Hello& hello, proto::Encoding encoding);
    void handle_bye(const std::string& routing_id);
    /// A request on its way to the DB threads, answered on `routing_id` with `req`; a claim's
    /// long-poll starts now.
    RoutedRequest routed(const std::string& routing_id, const Session& session,
                         proto::Encoding encoding, std::uint64_t req, StoreRequest ask,
                         const proto::Claim* claim) const;

    const RouterOptions& options_;
    Parts p_;
    bool refusing_ = false;
};

}  // namespace aclaim::coordinator
