#include "coordinator/db/mailbox.hpp"

#include <atomic>

namespace aclaim::coordinator {

namespace {

std::string unique_endpoint() {
    static std::atomic<unsigned> counter{0};
    return "inproc://aclaim-mailbox-" + std::to_string(++counter);
}

}  // namespace

Mailbox::Mailbox(zmq::context_t& context)
    : context_(context), endpoint_(unique_endpoint()), pull_(context, zmq::socket_type::pull) {
    pull_.set(zmq::sockopt::linger, 0);
    pull_.bind(endpoint_);
}

void Mailbox::enqueue(Event event) {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(event));
}

void Mailbox::enqueue(std::vector<Event> events) {
    std::lock_guard lock(mutex_);
    for (auto& e : events) events_.push_back(std::move(e));
}

std::deque<Event> Mailbox::collect() {
    zmq::message_t bell;
    while (pull_.recv(bell, zmq::recv_flags::dontwait)) {
    }
    std::deque<Event> out;
    std::lock_guard lock(mutex_);
    out.swap(events_);
    return out;
}

Poster::Poster(Mailbox& mailbox)
    : mailbox_(mailbox), push_(mailbox.context(), zmq::socket_type::push) {
    push_.set(zmq::sockopt::linger, 0);
    push_.set(zmq::sockopt::sndhwm, 16);
    push_.connect(mailbox.endpoint());
}

void Poster::post(Event event) {
    mailbox_.enqueue(std::move(event));
    // A full pipe means the router thread has doorbells it has not read yet; it will collect this
    // event with them.
    (void)push_.send(zmq::const_buffer(), zmq::send_flags::dontwait);
}

void Poster::post(std::vector<Event> events) {
    if (events.empty()) return;
    mailbox_.enqueue(std::move(events));
    (void)push_.send(zmq::const_buffer(), zmq::send_flags::dontwait);
}

}  // namespace aclaim::coordinator
