#include "coordinator/router/revocations.hpp"

#include <spdlog/spdlog.h>

#include "common/proto/wire_errors.hpp"

namespace aclaim::coordinator {

void Revocations::replace(const std::vector<std::string>& keys) {
    keys_ = std::unordered_set<std::string>(keys.begin(), keys.end());
    for (const auto& routing_id : sessions_.opened_with(keys_)) cut_off(routing_id);
}

void Revocations::cut_off(const std::string& routing_id) {
    const Session* s = sessions_.find(routing_id);
    if (s == nullptr) return;
    metrics_.auth.sessions_revoked.fetch_add(1, std::memory_order_relaxed);
    spdlog::warn(
        "session org={} worker={} cut off: its key {} was revoked; the leases it holds "
        "are left to expire and be reclaimed",
        s->org_id, s->worker_id, s->public_key);
    auto parked = parked_.take_connection(routing_id);
    sessions_.close(routing_id);
    metrics_.connected_sessions.store(static_cast<std::int64_t>(sessions_.size()));
    for (const auto& claim : parked) {
        replier_.send_error(routing_id, claim.reply.encoding, claim.reply.req,
                            proto::errors::kKeyRevoked,
                            "this connection's key has been revoked; nothing more is done for it");
    }
}

}  // namespace aclaim::coordinator
