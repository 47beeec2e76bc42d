#include "coordinator/db/work_queue.hpp"

#include <algorithm>
#include <iterator>
#include <optional>
#include <utility>

namespace aclaim::coordinator {

std::deque<DbRequest>& WorkQueue::line_of(store::OrgId org) {
    auto& line = others_[org];
    if (line.empty()) turns_.push_back(org);
    const auto now = SteadyClock::now();
    auto [it, fresh] = last_push_.try_emplace(org, now);
    if (!fresh) it->second = now;
    // Those whose window has passed are forgotten as new ones come, so the map holds the active.
    if (fresh && last_push_.size() > 16) {
        std::erase_if(last_push_, [&](const auto& p) { return now - p.second >= kShareWindow; });
    }
    return line;
}

void WorkQueue::push(DbRequest request) {
    std::unique_lock lock(mutex_);
    if (request.kind() == RequestKind::Renew) {
        renewals_.push_back(std::move(request));
    } else {
        line_of(request.ask.org_id).push_back(std::move(request));
        ++others_count_;
    }
    added(lock);
}

void WorkQueue::push_pair(DbRequest first, DbRequest follower) {
    std::unique_lock lock(mutex_);
    // One session's: one organization.
    auto& line = line_of(first.ask.org_id);
    line.push_back(std::move(first));
    line.push_back(std::move(follower));
    others_count_ += 2;
    added(lock);
}

void WorkQueue::push_group(std::vector<DbRequest> renewals) {
    std::unique_lock lock(mutex_);
    for (auto& r : renewals) renewals_.push_back(std::move(r));
    added(lock);
}

void WorkQueue::added(std::unique_lock<std::mutex>& lock) {
    if (held_) {
        pushed_while_held_ = true;
        return;
    }
    wake(lock);
}

void WorkQueue::wake(std::unique_lock<std::mutex>& lock) {
    const bool reserve = reserve_should_look();
    const bool share = share_waiting_ > 0;
    lock.unlock();
    ready_.notify_one();
    if (reserve) reserve_.notify_all();
    if (share) share_.notify_all();
}

bool WorkQueue::reserve_should_look() const {
    if (renewals_.empty() && others_empty()) return false;
    // A reserve taker waiting for work starts timing it only when no taker without patience is
    // waiting to take it at once: while one is, the work is gone before any patience runs out.
    if (reserve_idle_ > 0 && immediate_waiting_ == 0) return true;
    // One timing a younger request than the oldest now waiting would take it late.
    return reserve_timing_ > 0 && oldest_dispatch() < timing_from_;
}

void WorkQueue::hold() {
    std::lock_guard lock(mutex_);
    held_ = true;
}

void WorkQueue::release() {
    bool wake = false;
    bool reserve = false;
    bool share = false;
    {
        std::lock_guard lock(mutex_);
        held_ = false;
        wake = std::exchange(pushed_while_held_, false);
        reserve = wake && reserve_should_look();
        share = wake && share_waiting_ > 0;
    }
    if (wake) ready_.notify_all();
    if (reserve) reserve_.notify_all();
    if (share) share_.notify_all();
}

bool WorkQueue::batchable(const DbRequest& head, const DbRequest& other) {
    if (head.kind() != other.kind()) return false;
    // A coalesced claim is one LIMIT n statement for one organization and one set of queues.
    return head.kind() != RequestKind::Claim ||
           (head.ask.org_id == other.ask.org_id && head.ask.queues == other.ask.queues);
}

SteadyClock::time_point WorkQueue::oldest_dispatch() const {
    std::optional<SteadyClock::time_point> oldest;
    if (!renewals_.empty()) oldest = renewals_.front().dispatched_at;
    // One look per organization waiting: a line's front is its oldest.
    for (const auto org : turns_) {
        const auto at = others_.at(org).front().dispatched_at;
        if (!oldest || at < *oldest) oldest = at;
    }
    return *oldest;
}

std::vector<DbRequest> WorkQueue::take(std::size_t max_batch, bool mixed,
                                       SteadyClock::duration patience, Taker* taker) {
    std::unique_lock lock(mutex_);
    if (taker != nullptr && taker->busy_with) {
        const auto it = busy_.find(*taker->busy_with);
        if (it != busy_.end() && --it->second <= 0) busy_.erase(it);
        taker->busy_with.reset();
        // A taker waiting under the share rule may take that organization's work now.
        if (share_waiting_ > 0) share_.notify_all();
    }
    if (taker != nullptr && !taker->counted) {
        taker->counted = true;
        ++takers_;
    }
    const auto has_work = [this] { return closed_ || !renewals_.empty() || !others_empty(); };
    SteadyClock::time_point now{};
    while (true) {
        // Work there is, but none this taker may take (the share rule): wait for a push or a taker
        // coming back, or for the rule's window to pass, and look again.
        while (taker != nullptr && has_work() && !closed_ && renewals_.empty() &&
               !any_allowed(SteadyClock::now())) {
            ++share_waiting_;
            share_.wait_for(lock, kShareRecheck);
            --share_waiting_;
        }
        if (patience == SteadyClock::duration::zero()) {
            ++immediate_waiting_;
            ready_.wait(lock, has_work);
            --immediate_waiting_;
        } else {
            while (true) {
                if (!has_work()) {
                    ++reserve_idle_;
                    reserve_.wait(lock, has_work);
                    --reserve_idle_;
                }
                if (closed_) break;
                const auto from = oldest_dispatch();
                if (SteadyClock::now() >= from + patience) break;
                // Woken early only when an older request arrives, or at close: otherwise the head
                // timed here is taken or still waiting when the wait ends, and the loop looks
                // again.
                timing_from_ = reserve_timing_ == 0 ? from : std::max(timing_from_, from);
                ++reserve_timing_;
                reserve_.wait_until(lock, from + patience);
                --reserve_timing_;
            }
        }
        now = SteadyClock::now();
        // What woke it may be work it must leave to another taker: then it waits again.
        if (taker == nullptr || closed_ || !renewals_.empty() || any_allowed(now)) break;
    }
    // A spill taker came for what waited past its patience: that is what it takes.
    std::optional<SteadyClock::time_point> due_by;
    if (patience != SteadyClock::duration::zero() && !closed_) due_by = now - patience;
    auto batch = !renewals_.empty() ? take_renewals(max_batch)
                                    : take_others(max_batch, mixed, due_by, taker != nullptr, now);
    if (taker != nullptr && !batch.empty() && batch.front().kind() != RequestKind::Renew) {
        taker->busy_with = batch.front().ask.org_id;
        ++busy_[*taker->busy_with];
    }
    // Work is left: another taker without patience takes it, or a reserve one starts timing it.
    if (!renewals_.empty() || !others_empty()) wake(lock);
    return batch;
}

bool WorkQueue::others_active(store::OrgId org, SteadyClock::time_point now) const {
    for (const auto& [other, at] : last_push_) {
        if (other != org && now - at < kShareWindow) return true;
    }
    return false;
}

bool WorkQueue::allowed(store::OrgId org, SteadyClock::time_point now) const {
    if (takers_ <= 1) return true;
    const auto it = busy_.find(org);
    if (it == busy_.end() || it->second < takers_ - 1) return true;
    return !others_active(org, now);
}

bool WorkQueue::any_allowed(SteadyClock::time_point now) const {
    return std::any_of(turns_.begin(), turns_.end(),
                       [&](store::OrgId org) { return allowed(org, now); });
}

std::vector<DbRequest> WorkQueue::take_others(std::size_t max_batch, bool mixed,
                                              std::optional<SteadyClock::time_point> due_by,
                                              bool share, SteadyClock::time_point now) {
    if (turns_.empty()) return {};
    const auto due = [&](store::OrgId org) {
        return (!due_by || others_.at(org).front().dispatched_at <= *due_by) &&
               (!share || allowed(org, now));
    };
    // While another taker runs an organization's batch, the first organization in turn that no
    // taker is busy with, even one whose requests have not waited a spill taker's patience: they
    // wait for that other batch, which is what the patience stands for. Otherwise the first in
    // turn (for a spill taker, the first whose oldest request waited past its patience).
    auto turn = turns_.end();
    if (!busy_.empty() && turns_.size() > 1) {
        turn = std::find_if(turns_.begin(), turns_.end(),
                            [this](store::OrgId org) { return busy_.count(org) == 0; });
    }
    if (turn == turns_.end()) turn = std::find_if(turns_.begin(), turns_.end(), due);
    if (turn == turns_.end() && share) {
        turn = std::find_if(turns_.begin(), turns_.end(),
                            [&](store::OrgId org) { return allowed(org, now); });
    }
    if (turn == turns_.end()) turn = turns_.begin();
    const store::OrgId org = *turn;
    // Others wait, or have pushed work within kShareWindow: this organization's batch is kept
    // short, so that theirs never waits long behind it. Alone, it is not bounded by jobs.
    const std::size_t max_jobs = turns_.size() > 1 || others_active(org, now)
                                     ? kFairShareJobs
                                     : static_cast<std::size_t>(-1);
    turns_.erase(turn);
    auto& line = others_.at(org);
    auto batch = take_from(line, max_batch, mixed, max_jobs);
    others_count_ -= batch.size();
    // Its turn is over: behind every other organization waiting, or gone with its last request.
    if (line.empty()) {
        others_.erase(org);
    } else {
        turns_.push_back(org);
    }
    return batch;
}

std::vector<DbRequest> WorkQueue::take_renewals(std::size_t max_batch) {
    std::vector<DbRequest> batch;
    // A group was pushed at once, so its members are next to each other.
    const auto group_end = [this](const std::deque<DbRequest>::iterator& it) {
        const std::uint64_t group = it->group;
        auto end = std::next(it);
        if (group != 0) {
            while (end != renewals_.end() && end->group == group) ++end;
        }
        return end;
    };
    const auto move_out = [&](const std::deque<DbRequest>::iterator& from,
                              const std::deque<DbRequest>::iterator& to) {
        for (auto i = from; i != to; ++i) batch.push_back(std::move(*i));
        return renewals_.erase(from, to);
    };
    auto it = move_out(renewals_.begin(), group_end(renewals_.begin()));
    // Looking further than a few batches ahead would make each take linear in the backlog.
    std::size_t budget = max_batch * 8;
    while (it != renewals_.end() && batch.size() < max_batch && budget > 0) {
        --budget;
        const auto end = group_end(it);
        const auto n = static_cast<std::size_t>(std::distance(it, end));
        if (batch.size() + n > max_batch) {
            it = end;
            continue;
        }
        it = move_out(it, end);
    }
    return batch;
}

std::vector<DbRequest> WorkQueue::take_from(std::deque<DbRequest>& items, std::size_t max_batch,
                                            bool mixed, std::size_t max_jobs) {
    std::vector<DbRequest> batch;
    if (items.empty()) return batch;
    // What a request asks of the statement: a claim its jobs, anything else one row.
    const auto jobs_of = [](const DbRequest& r) {
        return r.kind() == RequestKind::Claim
                   ? static_cast<std::size_t>(std::max(1, r.ask.max_jobs))
                   : std::size_t{1};
    };
    std::size_t jobs = 0;
    // A completion's follower (the claim its COMPLETE carried) is always the next item: both
    // were pushed together, and they are only ever taken together.
    const auto has_follower = [&items](const std::deque<DbRequest>::iterator& it) {
        const auto next = std::next(it);
        return next != items.end() && next->follows;
    };
    const auto take_pair = [&](std::deque<DbRequest>::iterator it) {
        const bool pair = has_follower(it);
        jobs += jobs_of(*it) + (pair ? jobs_of(*std::next(it)) : 0);
        batch.push_back(std::move(*it));
        it = items.erase(it);
        if (pair) {
            batch.push_back(std::move(*it));
            it = items.erase(it);
        }
        return it;
    };
    const auto mixes = [](const DbRequest& r) {
        return r.kind() == RequestKind::Complete || r.kind() == RequestKind::Claim;
    };
    mixed = mixed && mixes(items.front());
    const bool head_pair = has_follower(items.begin());
    take_pair(items.begin());
    // Without mixed transactions a completion and its follower go alone, one after the other.
    if (head_pair && !mixed) return batch;
    // Where the batch's first claim is: every other claim must serve its organization and queues.
    std::optional<std::size_t> first_claim;
    for (std::size_t i = 0; i < batch.size(); ++i) {
        if (batch[i].kind() == RequestKind::Claim) {
            first_claim = i;
            break;
        }
    }
    // Looking further than a few batches ahead would make each take linear in the backlog.
    std::size_t budget = max_batch * 8;
    for (auto it = items.begin(); it != items.end() && batch.size() < max_batch && budget > 0;
         --budget) {
        const bool pair = has_follower(it);
        const DbRequest* claim = pair ? &*std::next(it) : &*it;
        bool joins = false;
        if (!mixed) {
            joins = !pair && batchable(batch.front(), *it);
        } else if (it->kind() == RequestKind::Complete || claim->kind() == RequestKind::Claim) {
            joins = claim->kind() != RequestKind::Claim || !first_claim ||
                    batchable(batch[*first_claim], *claim);
        }
        if (joins && jobs + jobs_of(*it) + (pair ? jobs_of(*std::next(it)) : 0) > max_jobs) {
            break;
        }
        if (!joins) {
            it = pair ? std::next(it, 2) : std::next(it);
            continue;
        }
        if (!first_claim && claim->kind() == RequestKind::Claim) {
            first_claim = batch.size() + (pair ? 1 : 0);
        }
        // A pair may take the batch one past max_batch: its halves are never split.
        it = take_pair(it);
    }
    return batch;
}

void WorkQueue::close() {
    {
        std::lock_guard lock(mutex_);
        closed_ = true;
    }
    ready_.notify_all();
    reserve_.notify_all();
    share_.notify_all();
}

std::size_t WorkQueue::size() const {
    std::lock_guard lock(mutex_);
    return renewals_.size() + others_count_;
}

std::size_t WorkQueue::queued_of(store::OrgId org) const {
    std::lock_guard lock(mutex_);
    const auto it = others_.find(org);
    return it == others_.end() ? 0 : it->second.size();
}

}  // namespace aclaim::coordinator
