#pragma once

// What the transport knows before the protocol does: libzmq's socket monitor reports that the
// DEALER's connection dropped (the coordinator died, or missed the transport's PINGs for the
// silence bound) or could not be made, long before a request's reply timeout would say so.

#include <optional>
#include <string>
#include <zmq.hpp>

namespace aclaim::worker {

/// A connection event that ends the session: the client fails over when it sees one.
struct TransportEvent {
    enum class Kind { Disconnected, ConnectFailed, HandshakeFailed };
    Kind kind = Kind::Disconnected;
    std::string endpoint;
    std::string describe() const;
};

/// Watches one socket from construction to destruction; destroy it before the socket.
class SocketMonitor {
  public:
    SocketMonitor(zmq::context_t& context, zmq::socket_t& watched);
    ~SocketMonitor();
    SocketMonitor(const SocketMonitor&) = delete;
    SocketMonitor& operator=(const SocketMonitor&) = delete;

    /// For zmq::poll beside the watched socket.
    void* handle() { return pair_.handle(); }

    /// The next event that ends a session, if one is queued; other events are consumed.
    std::optional<TransportEvent> next();

  private:
    zmq::socket_t& watched_;
    zmq::socket_t pair_;
};

}  // namespace aclaim::worker
