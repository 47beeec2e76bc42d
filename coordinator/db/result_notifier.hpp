#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "common/store/assignment.hpp"
#include "coordinator/db/statement_watchdog.hpp"
#include "coordinator/metrics/metrics.hpp"

namespace aclaim::coordinator {

/// Tells result consumers that completions committed, after the commit and off the DB threads.
///
/// A completion used to notify inside its own transaction. PostgreSQL serializes every notifying
/// transaction behind one cluster-wide lock taken at commit and held through the commit's WAL
/// flush, so the completions of all DB threads (and of every coordinator) committed one at a time
/// and never shared a flush. Here a DB thread only records, after its commit returned, which
/// organizations have new results; this thread sends one notification per organization on the
/// results channel from a connection of its own, in a transaction of its own that commits without
/// waiting for its flush (a wake-up needs no durability). Requests that arrive while one is being
/// sent are coalesced into the next.
///
/// What a consumer may rely on: every notification is sent after the results it announces
/// committed, so a consumer woken by one and then reading sees them, and no result needs a
/// notification of its own. A consumer LISTENs before its first read and reads until nothing is
/// left before it waits, and bounds each wait: a notification lost with a connection or with a
/// coordinator that stopped between a commit and its notification delays a consumer until its next
/// look, and never hides a result.
class ResultNotifier {
  public:
    /// The channel: payload is the organization id.
    static constexpr const char* kChannel = "aclaim_results";

    /// The watchdog (whose clock times the deadlines) must outlive the notifier, and so must
    /// `counters` (notifications sent, rounds failed: /metrics). `deadline` bounds every
    /// statement, as on every coordinator connection.
    ResultNotifier(std::string dsn, StatementWatchdog& watchdog, std::chrono::milliseconds deadline,
                   metrics::ResultNotifierCounters& counters);
    ~ResultNotifier();
    ResultNotifier(const ResultNotifier&) = delete;
    ResultNotifier& operator=(const ResultNotifier&) = delete;

    void start();
    /// Sends what is pending when the database answers at once, then returns.
    void stop();

    /// Any thread, after the commit of completions in `org` returned: queues its notification and
    /// returns at once.
    void committed(common::OrgId org);

  private:
    void run();

    std::string dsn_;
    StatementWatchdog& watchdog_;
    const std::chrono::milliseconds deadline_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::set<common::OrgId> pending_;
    bool stop_ = false;
    metrics::ResultNotifierCounters& counters_;
    std::thread thread_;
};

}  // namespace aclaim::coordinator
