#include "coordinator/router/replier.hpp"

#include <spdlog/fmt/bin_to_hex.h>
#include <spdlog/spdlog.h>

#include <algorithm>

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
                         std::string_view code, const std::string& text,
                         std::optional<std::int32_t> retry_after_ms) {
    metrics_.count_error(code);
    send(routing_id,
         proto::Error{req, std::string(code), proto::errors::clip_text(text), retry_after_ms},
         encoding);
}

void Replier::answer_no_work(const RoutedRequest& claim, const std::string& reason) {
    metrics_.no_work.fetch_add(1, std::memory_order_relaxed);
    spdlog::debug("claim org={} worker={} outcome=no_work ({})", claim.ask().org_id,
                  claim.ask().worker_id, reason);
    send(claim.reply.routing_id, proto::NoWork{claim.reply.req, reason}, claim.reply.encoding);
    finish(claim.reply);
}

void Replier::answer_failure(const RoutedRequest& request, const DbFailure& failure) {
    const std::string_view code = wire_code(failure.kind);
    if (request.kind() == RequestKind::Claim) {
        answer_no_work(request, reason_text(code));
        return;
    }
    send_error(request.reply.routing_id, request.reply.encoding, request.reply.req, code,
               failure.text);
    finish(request.reply);
}

std::string_view Replier::wire_code(DbFailure::Kind kind) {
    switch (kind) {
        case DbFailure::Kind::Unavailable:
            return proto::errors::kDatabaseUnavailable;
        case DbFailure::Kind::Error:
            return proto::errors::kDatabaseError;
        case DbFailure::Kind::OutcomeUnknown:
            return proto::errors::kOutcomeUnknown;
        case DbFailure::Kind::NotCommitted:
            return proto::errors::kNotCommitted;
    }
    return proto::errors::kOutcomeUnknown;
}

std::string Replier::reason_text(std::string_view code) {
    std::string text(code);
    std::replace(text.begin(), text.end(), '_', ' ');
    return text;
}

void Replier::finish(const ReplyTo& to) {
    if (!to.counted) return;
    Session* session = sessions_.find(to.routing_id);
    if (session != nullptr && session->outstanding > 0) --session->outstanding;
}

}  // namespace aclaim::coordinator
