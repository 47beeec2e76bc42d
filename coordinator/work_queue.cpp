#include "coordinator/work_queue.hpp"

namespace aclaim::coordinator {

void WorkQueue::push(DbRequest request) {
    {
        std::lock_guard lock(mutex_);
        items_.push_back(std::move(request));
    }
    ready_.notify_one();
}

bool WorkQueue::batchable(const DbRequest& head, const DbRequest& other) {
    if (head.kind() != other.kind()) return false;
    // A coalesced claim is one LIMIT n statement for one organization.
    return head.kind() != RequestKind::Claim || head.from.org_id == other.from.org_id;
}

std::vector<DbRequest> WorkQueue::take(std::size_t max_batch) {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [this] { return closed_ || !items_.empty(); });
    std::vector<DbRequest> batch;
    if (items_.empty()) return batch;
    batch.push_back(std::move(items_.front()));
    items_.pop_front();
    // Looking further than a few batches ahead would make each take linear in the backlog.
    std::size_t budget = max_batch * 8;
    for (auto it = items_.begin(); it != items_.end() && batch.size() < max_batch && budget > 0;
         --budget) {
        if (batchable(batch.front(), *it)) {
            batch.push_back(std::move(*it));
            it = items_.erase(it);
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
    return items_.size();
}

}  // namespace aclaim::coordinator
