#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/base/clock.hpp"
#include "coordinator/db/events.hpp"
#include "coordinator/db/work_queue.hpp"
#include "coordinator/metrics/metrics.hpp"
#include "coordinator/router/replier.hpp"
#include "coordinator/router/routed_request.hpp"

namespace aclaim::coordinator {

/// Hands requests to the DB threads and keeps count of those not yet come back. Knows whether the
/// coordinator is draining (no new claims) or closed (the queue takes nothing more, so what would
/// have gone down is answered here). Every request a worker waits for is answered by its deadline
/// (`answer_within` after it was handed over, on the clock's monotonic time): when the database
/// has not answered by then, expire() answers it here, so that a database that hangs rather than
/// fails never leaves a worker without an answer. Router thread only.
class Dispatcher {
  public:
    Dispatcher(WorkQueue& queue, Replier& replier, Metrics& metrics, const base::Clock& clock,
               std::chrono::milliseconds answer_within)
        : queue_(queue),
          replier_(replier),
          metrics_(metrics),
          clock_(clock),
          answer_within_(answer_within) {}

    /// A worker's request, to be answered by its deadline.
    void dispatch(RoutedRequest request);
    /// A COMPLETE and the CLAIM it carries (protocol 1.2): both as dispatch() does, the claim
    /// queued right behind the completion and marked to follow it, so that a DB thread takes
    /// the two together (one transaction where the lock strategy allows) and the completion's
    /// answer goes out first.
    void dispatch_pair(RoutedRequest completion, RoutedRequest claim);
    /// The renewals of one RENEW that names several jobs (protocol 1.3): each as dispatch()
    /// does, with its own reply and deadline, queued as one group that a DB thread takes whole
    /// and renews in one statement.
    void dispatch_group(std::vector<RoutedRequest> renewals);
    /// Work on the coordinator's own behalf (releasing a lease it could not deliver): nobody waits
    /// for its answer, so it has no deadline and its outcome is only logged.
    void dispatch_own(StoreRequest request);
    /// An outcome of a dispatched request came back. For a worker's request, the request with its
    /// reply address; nothing when it was the coordinator's own, or when it was already answered
    /// at its deadline, so the outcome must not be answered again. Moves from `request` only when
    /// it returns the worker's request.
    std::optional<RoutedRequest> returned(DbRequest& request);

    /// Answers every request whose deadline has passed by `now`, by answer_at_deadline()
    /// (coordinator/db/events.hpp), the rule a DB thread whose statement is cut at the same
    /// deadline follows: a claim with NO_WORK, a renewal with ERROR database_unavailable, and a
    /// completion, failure or release with ERROR database_unavailable when no DB thread took it
    /// (it will not be run) or outcome_unknown when one did (the row decides a re-send). Returns
    /// how many it answered.
    std::size_t expire(base::MonotonicTime now);
    /// The earliest deadline not yet passed to expire(), if any; it may belong to a request that
    /// has come back since, which costs one early wake-up.
    std::optional<base::MonotonicTime> next_deadline() const;

    /// Requests handed to DB threads, neither come back nor answered at their deadline.
    std::size_t at_db() const { return at_db_; }
    /// Requests waiting for a DB thread.
    std::size_t queued() const { return queue_.size(); }
    /// Requests of one organization waiting for a DB thread, renewals aside.
    std::size_t queued_of(store::OrgId org) const { return queue_.queued_of(org); }
    /// Requests handed to the DB threads so far.
    std::uint64_t dispatched() const { return dispatched_; }

    void begin_drain() { draining_ = true; }
    bool draining() const { return draining_; }
    /// Closes the queue: the DB threads finish what they hold and take nothing more.
    void close();

  private:
    /// Gives a worker's request its ticket and deadline; returns what goes to the DB threads.
    DbRequest admit(RoutedRequest request, bool follows);
    void answer_expired(const RoutedRequest& request);
    /// Hands a request to the DB threads and counts it at the database.
    void send_down(DbRequest request);
    /// Drops deadlines of requests that came back already.
    void skip_returned();

    WorkQueue& queue_;
    Replier& replier_;
    Metrics& metrics_;
    const base::Clock& clock_;
    const std::chrono::milliseconds answer_within_;
    /// Requests to answer by a deadline and not yet come back, by ticket.
    std::unordered_map<std::uint64_t, RoutedRequest> pending_;
    /// Their deadlines in dispatch order, which is deadline order as the bound is fixed.
    std::deque<std::pair<base::MonotonicTime, std::uint64_t>> deadlines_;
    std::uint64_t last_ticket_ = 0;
    std::uint64_t dispatched_ = 0;
    std::size_t at_db_ = 0;
    bool draining_ = false;
    bool closed_ = false;
};

}  // namespace aclaim::coordinator
