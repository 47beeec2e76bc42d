#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <vector>

#include "coordinator/events.hpp"

namespace aclaim::coordinator {

/// Requests waiting for a DB thread. Handing out batches of one kind (and, for claims, one
/// organization) lets a DB thread later turn them into one coalesced statement while every
/// request is still answered on its own.
class WorkQueue {
public:
    void push(DbRequest request);

    /// Blocks until there is work or the queue is closed. Returns the oldest request together
    /// with up to max_batch - 1 later ones of the same kind that can share a statement, in
    /// arrival order. After close() the remaining requests are still handed out; an empty result
    /// means closed and drained.
    std::vector<DbRequest> take(std::size_t max_batch);

    /// Wakes every taker; no more pushes are expected.
    void close();

    std::size_t size() const;

private:
    static bool batchable(const DbRequest& head, const DbRequest& other);

    mutable std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<DbRequest> items_;
    bool closed_ = false;
};

}  // namespace aclaim::coordinator
