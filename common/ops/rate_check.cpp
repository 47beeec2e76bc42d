#include "common/ops/rate_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "common/ops/recovery.hpp"
#include "common/store/event_kinds.hpp"

namespace aclaim::ops {

namespace {

/// The number a 'configured' detail gives `key` ("rate=" or "burst="): nullopt when it does not
/// name it. Keys are whole words in the detail ("max_assigned=3, rate=2.5, burst=4").
std::optional<double> configured(const std::string& detail, const std::string& key) {
    for (std::size_t at = detail.find(key); at != std::string::npos;
         at = detail.find(key, at + 1)) {
        if (at == 0 || detail[at - 1] == ' ')
            return std::strtod(detail.c_str() + at + key.size(), nullptr);
    }
    return std::nullopt;
}

/// A queue's token bucket as schema/baseline/tables.sql keeps it; rate 0 is no limit.
struct Bucket {
    double rate = 0;
    int burst = 0;
    std::optional<double> tokens;  ///< none: full
    base::Instant refilled{};

    double at(base::Instant t) const {
        if (!tokens) return burst;
        const double elapsed = std::max<double>(0, static_cast<double>((t - refilled).count()));
        return std::min<double>(burst, *tokens + rate * elapsed / 1e6);
    }
    /// The change a 'configured' event makes, at `t`, as kOperatorConfigure makes it.
    void configure(const std::string& detail, base::Instant t) {
        const auto new_rate = configured(detail, "rate=");
        const auto new_burst = configured(detail, "burst=");
        if (!new_rate && !new_burst) return;
        if (new_rate && *new_rate == 0) {
            *this = Bucket{};
            return;
        }
        const double rate_after = new_rate ? *new_rate : rate;
        if (rate_after == 0) return;  // a burst alone, without a limit, changes nothing
        const int burst_after = new_burst   ? static_cast<int>(*new_burst)
                                : burst > 0 ? burst
                                            : static_cast<int>(std::ceil(rate_after));
        if (rate > 0) {
            tokens = std::min<double>(burst_after, at(t));
            refilled = std::max(refilled, t);
        } else {
            tokens.reset();
        }
        rate = rate_after;
        burst = std::max(1, burst_after);
    }
};

}  // namespace

void check_rates(const History& h, const std::unordered_map<store::JobId, const JobRow*>& rows,
                 const std::function<void(Invariant, store::JobId, std::string)>& violate) {
    using QueueKey = std::pair<store::OrgId, std::string>;
    std::map<QueueKey, std::vector<const QueueEvent*>> changes;
    for (const auto& q : h.queue_events) {
        if (store::is(q.kind, store::QueueEventKind::Configured) &&
            (configured(q.detail, "rate=") || configured(q.detail, "burst="))) {
            changes[{q.org_id, q.queue}].push_back(&q);
        }
    }
    if (changes.empty()) return;
    std::map<QueueKey, Bucket> buckets;
    std::map<QueueKey, std::size_t> applied;  // changes applied so far, per queue
    for (const auto& e : h.events) {
        if (!store::is(e.kind, store::EventKind::Claimed)) continue;
        const auto row = rows.find(e.job_id);
        if (row == rows.end()) continue;
        const QueueKey key{row->second->org_id, row->second->queue};
        const auto found = changes.find(key);
        if (found == changes.end()) continue;
        auto& bucket = buckets[key];
        auto& next = applied[key];
        while (next < found->second.size() && found->second[next]->at <= e.at) {
            bucket.configure(found->second[next]->detail, found->second[next]->at);
            ++next;
        }
        if (bucket.rate == 0) continue;
        const double tokens = bucket.at(e.at);
        // The statement's arithmetic is exact decimal; this replay's is binary, hence the slack.
        if (tokens < 1 - 1e-9) {
            violate(Invariant::RateRespected, e.job_id,
                    describe(e) + " found " + std::to_string(tokens) + " tokens in queue " +
                        key.second + "'s bucket");
        }
        bucket.tokens = std::max(0.0, tokens - 1);
        bucket.refilled = std::max(bucket.refilled, e.at);
    }
}

}  // namespace aclaim::ops
