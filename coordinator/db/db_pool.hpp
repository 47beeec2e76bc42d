#pragma once

#include <cstddef>
#include <string>
#include <thread>
#include <vector>

#include "common/base/clock.hpp"
#include "coordinator/db/mailbox.hpp"
#include "coordinator/db/work_queue.hpp"
#include "coordinator/http/metrics.hpp"
#include "coordinator/options.hpp"

namespace aclaim::coordinator {

class StoreHandle;

/// The threads that run store statements. Each owns one long-lived connection (its own
/// AssignmentStore with prepared statements), takes requests from the WorkQueue and posts every
/// outcome to the Mailbox, including the outcomes "database unavailable" and "commit outcome
/// unknown", so that no request is left unanswered.
class DbPool {
  public:
    /// Requests one thread takes at once when coalescing: claims of one organization, renewals
    /// or completions become one statement; each request is still answered on its own.
    static constexpr std::size_t kMaxBatch = 128;

    DbPool(DbPoolOptions options, const common::Clock& clock, WorkQueue& queue, Mailbox& mailbox,
           Metrics& metrics);
    ~DbPool();
    DbPool(const DbPool&) = delete;
    DbPool& operator=(const DbPool&) = delete;

    void start();
    /// Returns once the queue is closed and every request taken has been answered.
    void join();

  private:
    void run(int index);
    /// One request, or several of one kind to coalesce; one outcome per request, in order.
    std::vector<RequestOutcome> execute(StoreHandle& handle, std::vector<DbRequest> batch);
    RequestOutcome::Result resolve(StoreHandle& handle, const DbRequest& request);

    const DbPoolOptions options_;
    const common::Clock& clock_;
    WorkQueue& queue_;
    Mailbox& mailbox_;
    Metrics& metrics_;
    std::vector<std::thread> threads_;
};

}  // namespace aclaim::coordinator
