#include "coordinator/router/dispatcher.hpp"

#include <spdlog/spdlog.h>

#include "common/proto/wire_errors.hpp"

namespace aclaim::coordinator {

void Dispatcher::dispatch(RoutedRequest request) {
    if (closed_) {
        // Only reachable while the last events are processed at shutdown.
        if (request.kind() == RequestKind::Claim) {
            replier_.answer_no_work(request, std::string(proto::errors::kDraining));
        } else {
            replier_.send_error(request.reply.routing_id, request.reply.encoding, request.reply.req,
                                proto::errors::kDraining, "the coordinator is shutting down");
            replier_.finish(request.reply);
        }
        return;
    }
    // A claim dispatched again (its long-poll woken) has no completion left to follow.
    send_down(admit(std::move(request), false));
}

DbRequest Dispatcher::admit(RoutedRequest request, bool follows) {
    request.db.answer = true;
    request.db.follows = follows;
    request.db.ticket = ++last_ticket_;
    request.db.stage = std::make_shared<std::atomic<Stage>>(Stage::Queued);
    request.db.dispatched_at = LatencyClock::now();
    deadlines_.emplace_back(clock_.monotonic_now() + answer_within_, request.db.ticket);
    DbRequest down = request.db;
    pending_.emplace(down.ticket, std::move(request));
    return down;
}

void Dispatcher::dispatch_pair(RoutedRequest completion, RoutedRequest claim) {
    if (closed_) {
        dispatch(std::move(completion));
        dispatch(std::move(claim));
        return;
    }
    DbRequest first = admit(std::move(completion), false);
    DbRequest follower = admit(std::move(claim), true);
    at_db_ += 2;
    dispatched_ += 2;
    // One push: a DB thread woken by the first must not find it without its follower.
    queue_.push_pair(std::move(first), std::move(follower));
}

void Dispatcher::dispatch_group(std::vector<RoutedRequest> renewals) {
    if (closed_ || renewals.size() == 1) {
        for (auto& r : renewals) dispatch(std::move(r));
        return;
    }
    std::vector<DbRequest> down;
    down.reserve(renewals.size());
    for (auto& r : renewals) down.push_back(admit(std::move(r), false));
    const std::uint64_t group = down.front().ticket;
    for (auto& d : down) d.group = group;
    at_db_ += down.size();
    dispatched_ += down.size();
    // One push: a DB thread woken by the first must find the whole group.
    queue_.push_group(std::move(down));
}

void Dispatcher::dispatch_own(StoreRequest request) {
    if (closed_) {
        spdlog::warn(
            "org={} worker={}: release of an undelivered assignment left to the reaper at "
            "shutdown",
            request.org_id, request.worker_id);
        return;
    }
    DbRequest down;
    down.ask = std::move(request);
    down.answer = false;
    down.ticket = 0;
    down.stage = std::make_shared<std::atomic<Stage>>(Stage::Queued);
    down.dispatched_at = LatencyClock::now();
    send_down(std::move(down));
}

void Dispatcher::send_down(DbRequest request) {
    ++at_db_;
    ++dispatched_;
    queue_.push(std::move(request));
}

std::optional<RoutedRequest> Dispatcher::returned(DbRequest& request) {
    if (request.ticket == 0) {
        --at_db_;
        return std::nullopt;
    }
    // A request answered at its deadline no longer counts as at the database.
    const auto it = pending_.find(request.ticket);
    if (it == pending_.end()) return std::nullopt;
    RoutedRequest routed = std::move(it->second);
    pending_.erase(it);
    --at_db_;
    // What the DB thread recorded on its way (its timings) comes back with it.
    routed.db = std::move(request);
    return routed;
}

void Dispatcher::skip_returned() {
    while (!deadlines_.empty() && pending_.count(deadlines_.front().second) == 0) {
        deadlines_.pop_front();
    }
}

std::optional<base::MonotonicTime> Dispatcher::next_deadline() const {
    if (deadlines_.empty()) return std::nullopt;
    return deadlines_.front().first;
}

std::size_t Dispatcher::expire(base::MonotonicTime now) {
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

void Dispatcher::answer_expired(const RoutedRequest& request) {
    auto expected = Stage::Queued;
    // Whoever moves the stage first decides: from here on no DB thread runs this request.
    const bool untouched = request.db.stage->compare_exchange_strong(expected, Stage::Answered);
    const StoreRequest& ask = request.ask();
    const DbFailure failure = answer_at_deadline(ask.kind, !untouched, answer_within_);
    spdlog::warn("{} org={} job={} worker={}: {} ({}); answered without it", kind_name(ask.kind),
                 ask.org_id, ask.job_id, ask.worker_id, failure.text,
                 untouched ? "still queued, will not run" : "its statement was under way");
    replier_.answer_failure(request, failure);
}

void Dispatcher::close() {
    queue_.close();
    closed_ = true;
}

}  // namespace aclaim::coordinator
