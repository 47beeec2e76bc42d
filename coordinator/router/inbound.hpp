#pragma once

#include <chrono>
#include <deque>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_set>
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
        const base::Clock& clock;
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
    /// HELLOs of new sessions wait for the end of the round that read them, behind the requests
    /// of open sessions; true while some wait (the router must not sleep then).
    bool hellos_waiting() const { return !hellos_.empty(); }
    /// Opens the sessions of the HELLOs waiting, up to one round's worth.
    void admit_hellos() { admit_hellos(kHellosPerRound); }
    /// The drain's bound: a `draining` refusal tells a worker granted reconnect hints to come back
    /// once it has passed.
    void draining_until(base::MonotonicTime until) { drain_until_ = until; }
    /// What a worker granted reconnect hints is told to wait after an ERROR `code`, if anything.
    /// For `draining`: a second (the drain and a successor's start), then, for the claim of a
    /// session it turns out (`whole_window`), a uniformly random share of the window of this
    /// coordinator's sessions (common/base/reconnect_spread.hpp), so that they come back spread as
    /// the fleet's size asks; a HELLO, whose worker took its share already, up to a second more.
    std::optional<std::int32_t> retry_after(std::string_view code, bool whole_window = false);
    /// The connection that had descriptor `fd` has closed (AcceptMonitor): its sessions are
    /// closed and their parked claims dropped, with nobody left to answer. Must run before the
    /// socket is read again, so that a new connection given the same descriptor is not taken for
    /// the old one (AcceptMonitor::take_closed).
    void connection_closed(int fd);
    /// What a request refused at a per-key or per-organization limit is told to wait: for a
    /// parked-claim limit a second, for a session limit five (long polls end and are answered
    /// sooner than sessions close); and up to as much again, so that those turned away together
    /// do not come back together.
    std::int32_t limit_retry_after(Metrics::TenantLimit limit);

    /// New sessions opened per round at most; the rest wait for the next round.
    static constexpr std::size_t kHellosPerRound = 256;
    /// HELLOs waiting at most; beyond, a HELLO is answered `overloaded` at once, with
    /// retry_after_ms (reconnect hints) of kRetryPerWaitingHello for each one ahead of it.
    static constexpr std::size_t kMaxHellosWaiting = 2048;
    static constexpr std::chrono::milliseconds kRetryPerWaitingHello{2};

  private:
    /// What the transport says about the connection a message came on: under CURVE, the ZAP
    /// User-Id and the client's public key; both empty in plaintext mode.
    struct Credentials {
        std::string user_id;
        std::string public_key;
        /// The key's queue limit, comma-separated; empty: any queue.
        std::string queues;
    };

    /// A per-key or per-organization limit (RouterOptions) refused `req`: ERROR overloaded, with
    /// retry_after_ms for a worker granted reconnect hints.
    void refuse_at_limit(const std::string& routing_id, proto::Encoding encoding, std::uint64_t req,
                         bool hinted, Metrics::TenantLimit limit, const std::string& text);
    /// Which parked-claim limit a CLAIM that may wait would pass, if any.
    std::optional<Metrics::TenantLimit> parked_limit(const std::string& routing_id,
                                                     store::OrgId org) const;
    void handle_message(const std::string& routing_id, const Credentials& credentials,
                        const std::vector<std::string_view>& frames, std::size_t frame_count);
    void handle_request(const std::string& routing_id, const Credentials& credentials,
                        const proto::Decoded& decoded);
    void handle_hello(const std::string& routing_id, const Credentials& credentials,
                      const proto::Hello& hello, proto::Encoding encoding, int fd);
    void handle_bye(const std::string& routing_id);
    /// A request on its way to the DB threads, answered on `routing_id` with `req`; a claim's
    /// long-poll starts now.
    RoutedRequest routed(const std::string& routing_id, const Session& session,
                         proto::Encoding encoding, std::uint64_t req, StoreRequest ask,
                         const proto::Claim* claim) const;

    struct WaitingHello {
        std::string routing_id;
        Credentials credentials;
        proto::Hello hello;
        proto::Encoding encoding;
        int fd = -1;
    };
    void admit_hellos(std::size_t at_most);

    const RouterOptions& options_;
    Parts p_;
    bool refusing_ = false;
    /// The descriptor of the connection the message being handled came on (ZMQ_SRCFD).
    int current_fd_ = -1;
    std::deque<WaitingHello> hellos_;
    /// The connections of hellos_: a request on one of them first admits what waits.
    std::unordered_set<std::string> waiting_ids_;
    base::MonotonicTime drain_until_{};
    std::minstd_rand spread_{std::random_device{}()};
};

}  // namespace aclaim::coordinator
