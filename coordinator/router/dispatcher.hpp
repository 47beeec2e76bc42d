#pragma once

#include <cstddef>

#include "coordinator/db/events.hpp"
#include "coordinator/db/work_queue.hpp"
#include "coordinator/router/replier.hpp"

namespace aclaim::coordinator {

/// Hands requests to the DB threads and keeps count of those not yet come back. Knows whether the
/// coordinator is draining (no new claims) or closed (the queue takes nothing more, so what would
/// have gone down is answered here). Router thread only.
class Dispatcher {
  public:
    Dispatcher(WorkQueue& queue, Replier& replier) : queue_(queue), replier_(replier) {}

    void dispatch(DbRequest request);
    /// An outcome of a dispatched request came back.
    void returned() { --at_db_; }

    /// Requests handed to DB threads and not yet come back.
    std::size_t at_db() const { return at_db_; }
    /// Requests waiting for a DB thread.
    std::size_t queued() const { return queue_.size(); }

    void begin_drain() { draining_ = true; }
    bool draining() const { return draining_; }
    /// Closes the queue: the DB threads finish what they hold and take nothing more.
    void close();

  private:
    WorkQueue& queue_;
    Replier& replier_;
    std::size_t at_db_ = 0;
    bool draining_ = false;
    bool closed_ = false;
};

}  // namespace aclaim::coordinator
