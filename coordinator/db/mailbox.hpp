#pragma once

#include <deque>
#include <mutex>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "coordinator/db/events.hpp"

namespace aclaim::coordinator {

/// Carries events from the DB threads, the reaper and the listener to the router thread. Only
/// the router thread may touch the ROUTER socket, so it polls the mailbox's inproc PULL socket
/// next to it. The events themselves wait in a locked deque; the inproc message is just a
/// doorbell, so a full pipe can drop it without losing anything.
class Mailbox {
  public:
    /// Binds the doorbell. Call from the router thread.
    explicit Mailbox(zmq::context_t& context);

    /// The socket for the router thread to poll.
    zmq::socket_t& doorbell() { return pull_; }

    /// Router thread: swallows pending doorbells and returns every waiting event, oldest first.
    std::deque<Event> collect();

    const std::string& endpoint() const { return endpoint_; }
    zmq::context_t& context() { return context_; }

    /// Only the Poster rings.
    void enqueue(Event event);
    void enqueue(std::vector<Event> events);

  private:
    zmq::context_t& context_;
    std::string endpoint_;
    zmq::socket_t pull_;
    std::mutex mutex_;
    std::deque<Event> events_;
};

/// One producer thread's way into the mailbox: create, use and destroy it in that thread, as a
/// ZeroMQ socket belongs to one thread.
class Poster {
  public:
    explicit Poster(Mailbox& mailbox);
    void post(Event event);
    /// Several events with one doorbell: a DB thread's whole batch wakes the router thread once.
    void post(std::vector<Event> events);

  private:
    Mailbox& mailbox_;
    zmq::socket_t push_;
};

}  // namespace aclaim::coordinator
