#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <thread>
#include <vector>

#include "common/base/clock.hpp"
#include "coordinator/db/connections.hpp"
#include "coordinator/db/mailbox.hpp"
#include "coordinator/db/statement_watchdog.hpp"
#include "coordinator/db/work_queue.hpp"
#include "coordinator/metrics/metrics.hpp"
#include "coordinator/options.hpp"

namespace aclaim::coordinator {

class ResultNotifier;
class StoreHandle;

/// The threads that run store statements. Each owns one long-lived connection (its own
/// AssignmentStore with prepared statements), takes requests from the WorkQueue and posts every
/// outcome to the Mailbox, including the outcomes "database unavailable" and "commit outcome
/// unknown", so that no request is left unanswered. Every statement runs under the watchdog: one
/// the database has not answered by the deadline has its connection cut, and the thread moves on
/// to a new connection (on whichever host a multi-host DSN finds writable) instead of waiting on a
/// server that hangs. A request the router has already answered at its deadline is not run.
class DbPool {
  public:
    /// Requests one thread takes at once when coalescing: claims of one organization, renewals
    /// or completions become one statement; each request is still answered on its own.
    static constexpr std::size_t kMaxBatch = 128;

    /// The watchdog of `connections` must be running while requests are taken, and `connections`
    /// outlive the pool, as must
    /// `results` (when given), which hears of every organization whose completions committed.
    DbPool(DbPoolOptions options, const Connections& connections, std::chrono::milliseconds lease,
           const base::Clock& clock, WorkQueue& queue, Mailbox& mailbox, Metrics& metrics,
           ResultNotifier* results = nullptr);
    ~DbPool();
    DbPool(const DbPool&) = delete;
    DbPool& operator=(const DbPool&) = delete;

    void start();
    /// Returns once the queue is closed and every request taken has been answered.
    void join();

  private:
    void run(int index);
    /// Keeps the requests no one has answered yet, marking them started.
    static std::vector<DbRequest> start_unanswered(std::vector<DbRequest> batch);
    /// One request, or several of one kind to coalesce; one outcome per request, in order.
    std::vector<RequestOutcome> execute(StoreHandle& handle, StatementWatchdog::Watch& watch,
                                        std::vector<DbRequest> batch);
    /// Whether a batch holds more than one kind: completions and claims for one transaction.
    static bool mixed_kinds(const std::vector<DbRequest>& batch);
    /// Completions and one organization's claims in one transaction (complete_and_claim); one
    /// outcome per request, in order, and on a lost connection each completion resolved from its
    /// row as execute() does.
    std::vector<RequestOutcome> execute_mixed(StoreHandle& handle, StatementWatchdog::Watch& watch,
                                              std::vector<DbRequest> batch);
    RequestOutcome::Result resolve(StoreHandle& handle, StatementWatchdog::Watch& watch,
                                   const StoreRequest& request);
    /// Tells the result notifier of an accepted completion, once its commit has returned.
    void announce(const RequestOutcome& outcome) const;
    base::MonotonicTime deadline() const;

    const DbPoolOptions options_;
    const Connections& connections_;  ///< connections, their deadline and watchdog slots
    const std::chrono::milliseconds lease_;
    const base::Clock& clock_;
    WorkQueue& queue_;
    Mailbox& mailbox_;
    Metrics& metrics_;
    ResultNotifier* results_;
    std::vector<std::thread> threads_;
};

}  // namespace aclaim::coordinator
