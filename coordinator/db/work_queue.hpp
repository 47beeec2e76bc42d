#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "coordinator/db/events.hpp"

namespace aclaim::coordinator {

/// Requests waiting for a DB thread. Handing out batches of one kind (and, for claims, one
/// organization) lets a DB thread later turn them into one coalesced statement while every
/// request is still answered on its own.
///
/// Organizations take turns: the requests other than renewals wait in one line per organization,
/// and each take serves the next organization in turn (preferring one none of the other takers is
/// busy with), so that a flood from one organization delays another's claims by at most a batch,
/// not by its whole backlog. While more than one organization waits, a batch of claims asks for
/// at most kFairShareJobs jobs, so that the batch another organization waits behind is short.
/// One organization alone has one line and batches as large as they come.
///
/// Renewals go before everything else: a renewal queued behind a backlog can reach the row after
/// the lease it was meant to extend, and a lapsed lease costs a reclaim, a refused completion and
/// the job done twice. They are few (one per held job per heartbeat) and cheap, so they cannot
/// starve the rest. Everything else keeps arrival order: putting completions before claims as
/// well was measured to starve claims of DB threads and cut coalesced throughput.
class WorkQueue {
  public:
    /// The jobs a batch of claims may ask for (the sum of their max_jobs; a larger claim goes
    /// alone) while other organizations are active: about one claim of the protocol's largest
    /// ordinary size, the shortest batch another organization's claim can wait behind. Measured
    /// in the neighbour bench: at 256 the quiet organization's claim p99 rose 1.5-2.8x beside a
    /// flood, at 100 1.7x. A batch of one organization alone has no such bound.
    static constexpr std::size_t kFairShareJobs = 100;

    /// While another organization has pushed work within this window, one organization's batches
    /// may occupy every taker but one (the share rule), and ask for at most kFairShareJobs jobs.
    static constexpr auto kShareWindow = std::chrono::seconds(1);
    /// How often a taker held back by the share rule looks again without being woken.
    static constexpr auto kShareRecheck = std::chrono::milliseconds(5);

    /// A DB thread's own state across takes: the organization of the batch it took last, which it
    /// is busy with until it takes again. Takers that pass one are counted, for the share rule:
    /// while another organization is active, one organization's batches take at most all of them
    /// but one, so that the other's claims find a taker free instead of waiting for a batch.
    struct Taker {
        std::optional<store::OrgId> busy_with;
        bool counted = false;
    };

    void push(DbRequest request);
    /// A completion and the claim that follows it (DbRequest::follows), queued together so that
    /// no taker sees one without the other.
    void push_pair(DbRequest first, DbRequest follower);
    /// The renewals of one RENEW that names several jobs (DbRequest::group), queued together and
    /// handed out together, however many: they are one statement.
    void push_group(std::vector<DbRequest> renewals);

    /// Blocks until there is work or the queue is closed. Returns the oldest renewal (or, when
    /// there is none, the oldest other request) together with up to max_batch - 1 later ones of
    /// the same kind that can share a statement, in arrival order. A group of renewals is never
    /// split: the oldest one's whole group is taken even beyond max_batch, and a later group
    /// joins only when it fits. With `mixed`, a completion or
    /// a claim at the head takes the later completions and claims alike (the claims of the
    /// batch's first claim's organization and queues only), for one transaction that runs both.
    /// After close() the remaining requests are still handed out; an empty result means closed
    /// and drained. With `patience`, a spill taker: it leaves the requests to the others until
    /// the oldest waiting one was dispatched that long ago (DbRequest::dispatched_at), so that
    /// one taker makes the transactions while it keeps up, and another joins when it does not.
    /// With `taker`, the take also ends the taker's previous batch, and prefers an organization
    /// no other taker is busy with.
    std::vector<DbRequest> take(std::size_t max_batch, bool mixed = false,
                                SteadyClock::duration patience = {}, Taker* taker = nullptr);

    /// From hold() to release(), pushes wake no DB thread; release() wakes them once for all
    /// that was pushed meanwhile. The router thread holds the queue while it reads a round of
    /// messages, so that a DB thread woken by the first request of the round does not take it
    /// alone while the rest of the round is still being read.
    void hold();
    void release();

    /// Wakes every taker; no more pushes are expected.
    void close();

    std::size_t size() const;
    /// Requests of one organization waiting, renewals aside.
    std::size_t queued_of(store::OrgId org) const;

  private:
    static bool batchable(const DbRequest& head, const DbRequest& other);
    /// When the oldest waiting request was dispatched (the queue is not empty).
    SteadyClock::time_point oldest_dispatch() const;
    std::vector<DbRequest> take_renewals(std::size_t max_batch);
    /// The next organization's batch, in turn: while some taker is busy, the first organization
    /// in turn no taker is busy with; otherwise the first in turn or, with `due_by` (a spill
    /// taker), the first whose oldest request was dispatched by then. With `share`, only
    /// organizations the share rule allows (allowed()), when there are any.
    std::vector<DbRequest> take_others(std::size_t max_batch, bool mixed,
                                       std::optional<SteadyClock::time_point> due_by, bool share,
                                       SteadyClock::time_point now);
    /// Whether another organization than `org` pushed work within kShareWindow.
    bool others_active(store::OrgId org, SteadyClock::time_point now) const;
    /// The share rule: a taker may take `org`'s batch unless every other taker is busy with it
    /// while another organization is active.
    bool allowed(store::OrgId org, SteadyClock::time_point now) const;
    bool any_allowed(SteadyClock::time_point now) const;
    /// At most max_batch requests (a pair may take one more), and claims for at most `max_jobs`
    /// jobs beyond the first request's.
    static std::vector<DbRequest> take_from(std::deque<DbRequest>& items, std::size_t max_batch,
                                            bool mixed, std::size_t max_jobs);
    /// Queues requests other than renewals on their organization's line.
    std::deque<DbRequest>& line_of(store::OrgId org);
    bool others_empty() const { return others_count_ == 0; }

    /// After requests were added (the lock held): wakes the takers that should look, or
    /// leaves that to release() while the queue is held.
    void added(std::unique_lock<std::mutex>& lock);
    /// With work in the queue (the lock held; released here): wakes one taker without patience,
    /// and the reserve takers when they should look.
    void wake(std::unique_lock<std::mutex>& lock);
    /// Whether a reserve taker (one with patience) should look at the queue again: one waiting
    /// for work should start timing it, or one timing should time an older request instead.
    bool reserve_should_look() const;

    mutable std::mutex mutex_;
    /// Takers without patience wait here, one woken per push. Takers with patience (the DB
    /// threads in reserve) wait on reserve_, woken only when they should look again
    /// (reserve_should_look), not by every push: with coalescing, the first DB thread takes
    /// nearly every round alone, and a reserve thread woken for it only takes CPU from it.
    std::condition_variable ready_;
    std::condition_variable reserve_;
    int immediate_waiting_ = 0;  ///< takers without patience waiting for work
    int reserve_idle_ = 0;       ///< takers with patience waiting for work
    int reserve_timing_ = 0;     ///< takers with patience timing the oldest request
    /// The youngest oldest-request any of them times from; read only while reserve_timing_ > 0.
    SteadyClock::time_point timing_from_{};
    std::deque<DbRequest> renewals_;
    /// Claims, completions, failures and releases, each organization's in arrival order.
    std::unordered_map<store::OrgId, std::deque<DbRequest>> others_;
    /// The organizations with requests in others_, in the order of their turns.
    std::deque<store::OrgId> turns_;
    std::size_t others_count_ = 0;
    /// Takers busy with a batch, by organization.
    std::unordered_map<store::OrgId, int> busy_;
    /// Takers that passed a Taker, and those of them waiting under the share rule.
    int takers_ = 0;
    int share_waiting_ = 0;
    std::condition_variable share_;
    /// When each organization last pushed work other than renewals (kShareWindow).
    std::unordered_map<store::OrgId, SteadyClock::time_point> last_push_;
    bool closed_ = false;
    bool held_ = false;
    bool pushed_while_held_ = false;
};

/// Holds a WorkQueue for a scope (WorkQueue::hold), releasing it however the scope ends.
class HeldQueue {
  public:
    explicit HeldQueue(WorkQueue& queue) : queue_(queue) { queue_.hold(); }
    ~HeldQueue() { queue_.release(); }
    HeldQueue(const HeldQueue&) = delete;
    HeldQueue& operator=(const HeldQueue&) = delete;

  private:
    WorkQueue& queue_;
};

}  // namespace aclaim::coordinator
