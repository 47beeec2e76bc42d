#include "coordinator/router/replier.hpp"

#include <spdlog/fmt/bin_to_hex.h>
#include <spdlog/spdlog.h>

#include "common/proto/wire_errors.hpp"

namespace aclaim::coordinator {

bool Replier::send(const std::string& routing_id, const proto::Message& message,
                   proto::Encoding encoding) {
    try {
        const proto::Frames f = proto::encode(message, encoding);
        // Only the first frame can fail: once it is queued, the whole message is.
        if (!router_.send(zmq::buffer(routing_id),
                          zmq::send_flags::sndmore | zmq::send_flags::dontwait)) {
            metrics_.replies_dropped.fetch_add(1, std::memory_order_relaxed);
            spdlog::debug("{} to connection {} dropped: its queue is full",
                          proto::type_name(message), spdlog::to_hex(routing_id));
            return false;
        }
        (void)router_.send(zmq::buffer(f.tag), zmq::send_flags::sndmore);
        (void)router_.send(zmq::buffer(f.type), zmq::send_flags::sndmore);
        (void)router_.send(zmq::buffer(f.body), zmq::send_flags::none);
        return true;
    } catch (const std::exception& e) {
        // EHOSTUNREACH under ROUTER_MANDATORY: the peer disconnected.
        metrics_.replies_dropped.fetch_add(1, std::memory_order_relaxed);
        spdlog::debug("{} to connection {} dropped: {}", proto::type_name(message),
                      spdlog::to_hex(routing_id), e.what());
        return false;
    }
}

void Replier::send_error(const std::string& routing_id, proto::Encoding encoding, std::uint64_t req,
                         std::string_view code, const std::string& text) {
    metrics_.count_error(code);
    send(routing_id, proto::Error{req, std::string(code), proto::errors::clip_text(text)},
         encoding);
}

void Replier::answer_no_work(const DbRequest& claim, const std::string& reason) {
    metrics_.no_work.fetch_add(1, std::memory_order_relaxed);
    spdlog::debug("claim org={} worker={} outcome=no_work ({})", claim.from.org_id,
                  claim.from.worker_id, reason);
    send(claim.from.routing_id, proto::NoWork{claim.from.req, reason}, claim.from.encoding);
    finish(claim.from);
}

void Replier::finish(const Requester& from) {
    Session* session = sessions_.find(from.routing_id);
    if (session != nullptr && session->outstanding > 0) --session->outstanding;
}

}  // namespace aclaim::coordinator
