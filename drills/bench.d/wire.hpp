#pragma once

// Raw DEALER sockets speaking the wire protocol, for the probes that need many sessions or exact
// timing rather than the worker library's behaviour.

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>
#include <zmq.hpp>

#include "common/proto/protocol.hpp"
#include "worker/client.hpp"

namespace aclaim::drills {

/// Sends one message in the binary encoding.
void send(zmq::socket_t& s, const proto::Message& m);

/// One reply, or nullopt when nothing is waiting (or it did not decode).
std::optional<proto::Message> receive(zmq::socket_t& s);

/// A DEALER connected to `endpoint`, under CURVE when `curve` is enabled.
std::unique_ptr<zmq::socket_t> connect(zmq::context_t& ctx, const std::string& endpoint,
                                       const worker::CurveKeys& curve);

/// Session names "<prefix>-<first>" .. "<prefix>-<first + n - 1>": the HELLO worker id, and under
/// CURVE the name each key is registered under.
std::vector<std::string> session_names(const std::string& prefix, int n, int first = 0);

/// The body of http://host:port/metrics; nullopt when the server does not answer within a
/// second.
std::optional<std::string> get_metrics(const std::string& host_port);

/// The value of an unlabelled gauge on http://host:port/metrics, when it answers.
std::optional<double> gauge(const std::string& host_port, std::string_view name);

}  // namespace aclaim::drills
