#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "common/base/periodic_task.hpp"
#include "common/store/assignment.hpp"
#include "coordinator/db/connections.hpp"
#include "coordinator/metrics/metrics.hpp"

namespace aclaim::coordinator {

/// Tells result consumers that completions committed, after the commit and off the DB threads.
///
/// A completion does not notify inside its own transaction: PostgreSQL serializes every notifying
/// transaction behind one cluster-wide lock taken at commit and held through the commit's WAL
/// flush, so notifying completions of all DB threads (and of every coordinator) would commit one
/// at a time and never share a flush. Here a DB thread only records, after its commit returned,
/// which organizations have new results; this thread sends one notification per organization on the
/// results channel from a connection of its own, in a transaction of its own that commits without
/// waiting for its flush (a wake-up needs no durability). Requests that arrive while one is being
/// sent are coalesced into the next.
///
/// Rounds are paced: after one is sent the next waits at least kPace, so a busy coordinator sends
/// at most 1000 / kPace.count() rounds a second, each naming every organization that had results
/// meanwhile. Unpaced, a round followed nearly every DB batch (about 1,100 small notifying
/// transactions a second in the crowd phase's 16 active workers, 0.19 a job); paced, the claim
/// path makes 3–5% more jobs a second (docs/performance.md).
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
    /// The shortest time from one round to the next: a wake-up is at most this much later.
    static constexpr std::chrono::milliseconds kPace{10};

    /// `connections` (and its watchdog, whose clock times the deadlines) must outlive the
    /// notifier, and so must `counters` (notifications sent, rounds failed: /metrics) and
    /// `clock`, which paces the rounds and the backoff after a failed one (real time in the
    /// coordinator, whatever clock its router runs on).
    ResultNotifier(const Connections& connections, metrics::ResultNotifierCounters& counters,
                   const base::Clock& clock = base::real_time());
    /// Out of line, where Session is complete.
    ~ResultNotifier();

    void start();
    /// Sends what is pending when the database answers at once, then returns.
    void stop() { task_.stop(); }

    /// Any thread, after the commit of completions in `org` returned: queues its notification and
    /// returns at once.
    void committed(store::OrgId org);

  private:
    /// One round: sends what is pending; false when it failed (the organizations stay pending).
    bool round();

    const Connections& connections_;
    std::mutex mutex_;
    std::set<store::OrgId> pending_;
    metrics::ResultNotifierCounters& counters_;
    /// The notifier thread's connection and its retry state.
    struct Session;
    std::unique_ptr<Session> session_;
    /// Woken by committed(); waits kPace after a round and the backoff after a failed one.
    base::PeriodicTask task_;
};

}  // namespace aclaim::coordinator
