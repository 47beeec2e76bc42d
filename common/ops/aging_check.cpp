#include "common/ops/aging_check.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "common/store/event_kinds.hpp"

namespace aclaim::ops {

namespace {

/// The aging step a 'configured' detail sets ("aging=30000ms"; 0: removed); nullopt when it does
/// not name it.
std::optional<base::Duration> aging_of(const std::string& detail) {
    for (std::size_t at = detail.find("aging="); at != std::string::npos;
         at = detail.find("aging=", at + 1)) {
        if (at == 0 || detail[at - 1] == ' ') {
            const double ms = std::strtod(detail.c_str() + at + 6, nullptr);
            return std::chrono::duration_cast<base::Duration>(
                std::chrono::duration<double, std::milli>(ms));
        }
    }
    return std::nullopt;
}

/// One job's first wait in its queue.
struct Wait {
    base::Instant start{};                 ///< its enqueue, or its coming due when it was scheduled
    std::int64_t from = 0;                 ///< the event that began it
    std::optional<base::Instant> claimed;  ///< its first claim
};

using QueueKey = std::pair<store::OrgId, std::string>;

}  // namespace

void check_aging(const History& h, const std::unordered_map<store::JobId, const JobRow*>& rows,
                 const std::function<void(Invariant, store::JobId, std::string)>& violate) {
    std::map<QueueKey, std::vector<const QueueEvent*>> changes;
    for (const auto& q : h.queue_events) {
        if (store::is(q.kind, store::QueueEventKind::Configured) && aging_of(q.detail))
            changes[{q.org_id, q.queue}].push_back(&q);
    }
    if (changes.empty()) return;
    // Each job's first wait: from its enqueue (or its coming due) to its first claim.
    std::unordered_map<store::JobId, Wait> waits;
    for (const auto& e : h.events) {
        const auto row = rows.find(e.job_id);
        if (row == rows.end() || !changes.count({row->second->org_id, row->second->queue}))
            continue;
        auto it = waits.find(e.job_id);
        if (store::is(e.kind, store::EventKind::Enqueued) && it == waits.end()) {
            waits[e.job_id] = Wait{e.at, e.id, std::nullopt};
        } else if (store::is(e.kind, store::EventKind::Due) && it != waits.end() &&
                   !it->second.claimed) {
            it->second.start = e.at;
            it->second.from = e.id;
        } else if (store::is(e.kind, store::EventKind::Claimed) && it != waits.end() &&
                   !it->second.claimed) {
            it->second.claimed = e.at;
        }
    }
    // Per queue and enqueued priority, the jobs waiting, oldest first.
    using Waiting = std::map<int, std::set<std::pair<base::Instant, store::JobId>>>;
    std::map<QueueKey, Waiting> waiting;
    std::map<QueueKey, std::optional<base::Duration>> step;
    std::map<QueueKey, std::size_t> applied;
    auto priority_of = [&h](store::JobId id) {
        const auto it = h.priorities.find(id);
        return it == h.priorities.end() ? JobPriority{} : it->second;
    };
    for (const auto& e : h.events) {
        const auto row = rows.find(e.job_id);
        const auto w = waits.find(e.job_id);
        if (row == rows.end() || w == waits.end()) continue;
        const QueueKey key{row->second->org_id, row->second->queue};
        auto& queue = waiting[key];
        const JobPriority priority = priority_of(e.job_id);
        const int base = priority.base_priority.value_or(priority.priority);
        const std::pair<base::Instant, store::JobId> self{w->second.start, e.job_id};
        if (e.id == w->second.from) {
            queue[base].insert(self);
            continue;
        }
        if (store::is(e.kind, store::EventKind::Due)) continue;
        if (!queue[base].erase(self) || !store::is(e.kind, store::EventKind::Claimed)) continue;
        // A first claim of K: the aging step in force then.
        const auto& list = changes.at(key);
        auto& next = applied[key];
        while (next < list.size() && list[next]->at <= e.at) {
            const auto s = aging_of(list[next]->detail);
            step[key] = s && s->count() > 0 ? s : std::nullopt;
            ++next;
        }
        if (!step[key]) continue;
        const int k_priority = priority.priority;
        for (const auto& [j_base, jobs] : queue) {
            if (jobs.empty() || !(*jobs.begin() < self)) continue;
            const auto& [j_start, j_id] = *jobs.begin();
            const auto j_claimed = waits.at(j_id).claimed;
            if (j_claimed && *j_claimed <= e.at + kAgingTolerance) continue;
            const auto bound = std::max(0, k_priority - j_base) * *step[key] + kAgingTolerance;
            if (e.at - j_start > bound) {
                violate(Invariant::AgingBoundKept, j_id,
                        "waiting since " + std::to_string(base::to_micros(j_start)) +
                            " at priority " + std::to_string(j_base) + " in aged queue " +
                            key.second + " when younger job " + std::to_string(e.job_id) +
                            " (priority " + std::to_string(k_priority) + ") was claimed at " +
                            std::to_string(base::to_micros(e.at)));
            }
        }
    }
}

}  // namespace aclaim::ops
