#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <zmq.hpp>

#include "coordinator/db/events.hpp"
#include "coordinator/metrics/metrics.hpp"
#include "coordinator/router/routed_request.hpp"
#include "coordinator/router/sessions.hpp"

namespace aclaim::coordinator {

/// The only code that writes to the ROUTER socket, and the one place a request is counted as
/// answered. Both the inbound side and the outcome side reply through it; it calls nothing back.
/// Router thread only.
class Replier {
  public:
    Replier(zmq::socket_t& router, SessionTable& sessions, Metrics& metrics)
        : router_(router), sessions_(sessions), metrics_(metrics) {}

    /// False when the message could not be queued: the peer is gone or its queue is full.
    bool send(const std::string& routing_id, const proto::Message& message,
              proto::Encoding encoding);
    /// `retry_after_ms` only to a worker granted proto::kFeatureReconnectHints.
    void send_error(const std::string& routing_id, proto::Encoding encoding, std::uint64_t req,
                    std::string_view code, const std::string& text,
                    std::optional<std::int32_t> retry_after_ms = std::nullopt);
    /// Answers a claim NO_WORK with `reason` and counts it answered.
    void answer_no_work(const RoutedRequest& claim, const std::string& reason);
    /// Answers a request the database could not: a claim with NO_WORK, anything else with the
    /// ERROR whose code wire_code() gives; counts it answered.
    void answer_failure(const RoutedRequest& request, const DbFailure& failure);
    /// A request to this address has been answered: its session may take another.
    void finish(const ReplyTo& to);

    /// The ERROR code (common/proto/wire_errors.hpp) that tells a worker what a failure means
    /// for a re-send.
    static std::string_view wire_code(DbFailure::Kind kind);
    /// NO_WORK reasons are read by people: "database unavailable" rather than the ERROR code.
    static std::string reason_text(std::string_view code);

  private:
    zmq::socket_t& router_;
    SessionTable& sessions_;
    Metrics& metrics_;
};

}  // namespace aclaim::coordinator
