#include "worker/socket_monitor.hpp"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <zmq_addon.hpp>

namespace aclaim::worker {

namespace {

constexpr int kWatched = ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CONNECT_RETRIED |
                         ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                         ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;

/// inproc names are per context, and one context may hold many clients.
std::string fresh_address() {
    static std::atomic<std::uint64_t> counter{0};
    return "inproc://aclaim-worker-monitor-" + std::to_string(++counter);
}

}  // namespace

std::string TransportEvent::describe() const {
    switch (kind) {
        case Kind::Disconnected:
            return "the connection to " + endpoint + " dropped";
        case Kind::ConnectFailed:
            return "cannot connect to " + endpoint;
        case Kind::HandshakeFailed:
            return "the handshake with " + endpoint + " failed";
    }
    return "transport event at " + endpoint;
}

SocketMonitor::SocketMonitor(zmq::context_t& context, zmq::socket_t& watched)
    : watched_(watched), pair_(context, zmq::socket_type::pair) {
    const auto address = fresh_address();
    if (zmq_socket_monitor(watched_.handle(), address.c_str(), kWatched) != 0) throw zmq::error_t();
    pair_.set(zmq::sockopt::linger, 0);
    pair_.connect(address);
}

SocketMonitor::~SocketMonitor() {
    // Stops the monitor before either socket closes, so no event is written to a closed pipe.
    zmq_socket_monitor(watched_.handle(), nullptr, 0);
}

std::optional<TransportEvent> SocketMonitor::next() {
    while (true) {
        std::vector<zmq::message_t> parts;
        if (!zmq::recv_multipart(pair_, std::back_inserter(parts), zmq::recv_flags::dontwait))
            return std::nullopt;
        // Frame 1: a 16-bit event and a 32-bit value; frame 2: the endpoint.
        if (parts.size() != 2 || parts[0].size() < sizeof(std::uint16_t)) continue;
        std::uint16_t event = 0;
        std::memcpy(&event, parts[0].data(), sizeof event);
        TransportEvent out;
        out.endpoint = parts[1].to_string();
        if (event == ZMQ_EVENT_DISCONNECTED) {
            out.kind = TransportEvent::Kind::Disconnected;
        } else if (event == ZMQ_EVENT_CONNECT_RETRIED) {
            out.kind = TransportEvent::Kind::ConnectFailed;
        } else if ((event &
                    (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                     ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)) != 0) {
            out.kind = TransportEvent::Kind::HandshakeFailed;
        } else {
            continue;
        }
        return out;
    }
}

}  // namespace aclaim::worker
