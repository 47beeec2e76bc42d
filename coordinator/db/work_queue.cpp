#include "coordinator/db/work_queue.hpp"

#include <optional>

namespace aclaim::coordinator {

void WorkQueue::push(DbRequest request) {
    {
        std::lock_guard lock(mutex_);
        auto& items = request.kind() == RequestKind::Renew ? renewals_ : others_;
        items.push_back(std::move(request));
    }
    ready_.notify_one();
}

bool WorkQueue::batchable(const DbRequest& head, const DbRequest& other) {
    if (head.kind() != other.kind()) return false;
    // A coalesced claim is one LIMIT n statement for one organization and one set of queues.
    return head.kind() != RequestKind::Claim ||
           (head.ask.org_id == other.ask.org_id && head.ask.queues == other.ask.queues);
}

std::vector<DbRequest> WorkQueue::take(std::size_t max_batch, bool mixed) {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [this] { return closed_ || !renewals_.empty() || !others_.empty(); });
    if (!renewals_.empty()) return take_from(renewals_, max_batch, false);
    return take_from(others_, max_batch, mixed);
}

std::vector<DbRequest> WorkQueue::take_from(std::deque<DbRequest>& items, std::size_t max_batch,
                                            bool mixed) {
    std::vector<DbRequest> batch;
    if (items.empty()) return batch;
    batch.push_back(std::move(items.front()));
    items.pop_front();
    const auto mixes = [](const DbRequest& r) {
        return r.kind() == RequestKind::Complete || r.kind() == RequestKind::Claim;
    };
    mixed = mixed && mixes(batch.front());
    // Where the batch's first claim is: every other claim must serve its organization and queues.
    std::optional<std::size_t> first_claim;
    if (batch.front().kind() == RequestKind::Claim) first_claim = 0;
    // Looking further than a few batches ahead would make each take linear in the backlog.
    std::size_t budget = max_batch * 8;
    for (auto it = items.begin(); it != items.end() && batch.size() < max_batch && budget > 0;
         --budget) {
        bool joins = false;
        if (!mixed) {
            joins = batchable(batch.front(), *it);
        } else if (it->kind() == RequestKind::Complete) {
            joins = true;
        } else if (it->kind() == RequestKind::Claim) {
            joins = !first_claim || batchable(batch[*first_claim], *it);
        }
        if (joins) {
            if (!first_claim && it->kind() == RequestKind::Claim) first_claim = batch.size();
            batch.push_back(std::move(*it));
            it = items.erase(it);
        } else {
            ++it;
        }
    }
    return batch;
}

void WorkQueue::close() {
    {
        std::lock_guard lock(mutex_);
        closed_ = true;
    }
    ready_.notify_all();
}

std::size_t WorkQueue::size() const {
    std::lock_guard lock(mutex_);
    return renewals_.size() + others_.size();
}

}  // namespace aclaim::coordinator
