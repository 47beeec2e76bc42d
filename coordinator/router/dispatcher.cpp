#include "coordinator/router/dispatcher.hpp"

#include <spdlog/spdlog.h>

#include "common/base/overloaded.hpp"
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
    ++dispatched_;
    request.dispatched_at = LatencyClock::now();
    request.stage = std::make_shared<std::atomic<Stage>>(Stage::Queued);
    request.ticket = 0;
    if (request.answer) {
        request.ticket = ++last_ticket_;
        deadlines_.emplace_back(clock_.monotonic_now() + answer_within_, request.ticket);
        pending_.emplace(request.ticket, request);
    }
    queue_.push(std::move(request));
}

bool Dispatcher::returned(const DbRequest& request) {
    if (request.ticket == 0) {
        --at_db_;
        return true;
    }
    // A request answered at its deadline no longer counts as at the database.
    if (pending_.erase(request.ticket) == 0) return false;
    --at_db_;
    return true;
}

void Dispatcher::skip_returned() {
    while (!deadlines_.empty() && pending_.count(deadlines_.front().second) == 0) {
        deadlines_.pop_front();
    }
}

std::optional<common::MonotonicTime> Dispatcher::next_deadline() const {
    if (deadlines_.empty()) return std::nullopt;
    return deadlines_.front().first;
}

std::size_t Dispatcher::expire(common::MonotonicTime now) {
    std::size_t answered = 0;
    skip_returned();
    while (!deadlines_.empty() && deadlines_.front().first <= now) {
        const auto it = pending_.find(deadlines_.front().second);
        deadlines_.pop_front();
        if (it != pending_.end()) {
            answer_expired(it->second);
            pending_.erase(it);
            --at_db_;
            ++answered;
        }
        skip_returned();
    }
    if (answered > 0) metrics_.db_deadline_answers.fetch_add(answered, std::memory_order_relaxed);
    return answered;
}

void Dispatcher::answer_expired(DbRequest& request) {
    auto expected = Stage::Queued;
    // Whoever moves the stage first decides: from here on no DB thread runs this request.
    const bool untouched = request.stage->compare_exchange_strong(expected, Stage::Answered);
    const Requester& from = request.from;
    const std::string within =
        "the database did not answer within " + std::to_string(answer_within_.count()) + " ms";
    const RequestKind kind = request.kind();
    const common::JobId job =
        std::visit(common::Overloaded{[](const proto::Claim&) -> common::JobId { return 0; },
                                      [](const auto& m) -> common::JobId { return m.job_id; }},
                   request.body);
    spdlog::warn("{} org={} job={} worker={}: {} ({}); answered without it", kind_name(kind),
                 from.org_id, job, from.worker_id, within,
                 untouched ? "still queued, will not run" : "its statement was under way");
    if (kind == RequestKind::Claim) {
        replier_.answer_no_work(request, "database unavailable");
        return;
    }
    if (untouched || kind == RequestKind::Renew) {
        // A renewal is idempotent: re-sending it is safe whether or not this one committed.
        replier_.send_error(from.routing_id, from.encoding, from.req,
                            proto::errors::kDatabaseUnavailable,
                            within + (untouched ? "; nothing was attempted" : "; re-send"));
    } else {
        replier_.send_error(from.routing_id, from.encoding, from.req,
                            proto::errors::kOutcomeUnknown,
                            within +
                                " while the statement was under way; re-send the same "
                                "request, the job's row decides it");
    }
    replier_.finish(from);
}

void Dispatcher::close() {
    queue_.close();
    closed_ = true;
}

}  // namespace aclaim::coordinator
