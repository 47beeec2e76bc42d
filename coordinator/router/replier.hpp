#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <zmq.hpp>

#include "coordinator/db/events.hpp"
#include "coordinator/metrics/metrics.hpp"
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
    void send_error(const std::string& routing_id, proto::Encoding encoding, std::uint64_t req,
                    std::string_view code, const std::string& text);
    /// Answers a claim NO_WORK with `reason` and counts it answered.
    void answer_no_work(const DbRequest& claim, const std::string& reason);
    /// A request of this requester has been answered: its session may take another.
    void finish(const Requester& from);

  private:
    zmq::socket_t& router_;
    SessionTable& sessions_;
    Metrics& metrics_;
};

}  // namespace aclaim::coordinator
