#include "coordinator/router/dispatcher.hpp"

#include <spdlog/spdlog.h>

#include "common/proto/wire_errors.hpp"

namespace aclaim::coordinator {

void Dispatcher::dispatch(DbRequest request) {
    if (closed_) {
        // Only reachable while the last events are processed at shutdown.
        if (!request.answer) {
            spdlog::warn(
                "org={} worker={}: release of an undelivered assignment left to the "
                "reaper at shutdown",
                request.from.org_id, request.from.worker_id);
        } else if (request.kind() == RequestKind::Claim) {
            replier_.answer_no_work(request, std::string(proto::errors::kDraining));
        } else {
            replier_.send_error(request.from.routing_id, request.from.encoding, request.from.req,
                                proto::errors::kDraining, "the coordinator is shutting down");
            replier_.finish(request.from);
        }
        return;
    }
    ++at_db_;
    request.dispatched_at = LatencyClock::now();
    queue_.push(std::move(request));
}

void Dispatcher::close() {
    queue_.close();
    closed_ = true;
}

}  // namespace aclaim::coordinator
