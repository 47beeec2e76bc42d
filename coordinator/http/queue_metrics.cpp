#include "coordinator/http/queue_metrics.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <pqxx/pqxx>
#include <span>
#include <sstream>

#include "common/ops/operator_store.hpp"
#include "common/store/job_states.hpp"
#include "common/store/pg_time.hpp"
#include "coordinator/http/group_metrics.hpp"
#include "coordinator/http/http_sql.hpp"
#include "coordinator/http/schedule_metrics.hpp"

namespace aclaim::coordinator {

namespace {

struct Gauge {
    const char* name;
    const char* help;
    double (*value)(const ops::QueueStatus& q, base::Micros now);
};

constexpr Gauge kGauges[] = {
    {"aclaim_queue_depth", "Pending (claimable) jobs.",
     [](const ops::QueueStatus& q, base::Micros) { return static_cast<double>(q.pending); }},
    {"aclaim_queue_oldest_pending_seconds", "How long the oldest pending job has been claimable.",
     [](const ops::QueueStatus& q, base::Micros now) {
         const base::Micros age =
             q.oldest_pending_us ? std::max<base::Micros>(0, now - *q.oldest_pending_us) : 0;
         return static_cast<double>(age) * 1e-6;
     }},
    {"aclaim_queue_scheduled", "Jobs waiting for their run_at (delays and retry backoffs).",
     [](const ops::QueueStatus& q, base::Micros) { return static_cast<double>(q.scheduled); }},
    {"aclaim_queue_assigned", "Jobs leased out.",
     [](const ops::QueueStatus& q, base::Micros) { return static_cast<double>(q.assigned); }},
    {"aclaim_queue_parked", "Jobs handed to an outside system, waiting for its callback.",
     [](const ops::QueueStatus& q, base::Micros) { return static_cast<double>(q.parked); }},
    {"aclaim_queue_discarded", "Jobs whose every attempt was used up, waiting for a person.",
     [](const ops::QueueStatus& q, base::Micros) { return static_cast<double>(q.discarded); }},
    {"aclaim_queue_waiting", "Jobs waiting for their dependencies (workflows).",
     [](const ops::QueueStatus& q, base::Micros) { return static_cast<double>(q.waiting); }},
    {"aclaim_queue_paused", "1 while an operator has paused the queue.",
     [](const ops::QueueStatus& q, base::Micros) { return q.paused ? 1.0 : 0.0; }},
};

/// One gauge of a setting some queues have: a series for each queue `value` gives one for.
template <typename Value>
void optional_gauge(std::span<const ops::QueueStatus> queues, std::ostream& out, const char* name,
                    const char* help, Value value) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " gauge\n";
    for (const auto& q : queues) {
        const auto v = value(q);
        if (!v) continue;
        out << name << "{org=\"" << q.org_id << "\",queue=\"" << q.queue << "\"} " << *v << "\n";
    }
}

/// The rate limit gauges, for the queues that have a rate limit only: a queue without one
/// exports no series here, as it has no limit to show.
void rate_gauges(std::span<const ops::QueueStatus> queues, std::ostream& out) {
    optional_gauge(queues, out, "aclaim_queue_rate_limit",
                   "Claims a second the queue's rate limit allows, across every coordinator.",
                   [](const ops::QueueStatus& q) { return q.rate_per_s; });
    optional_gauge(queues, out, "aclaim_queue_rate_burst",
                   "Claims the queue's rate limit allows at once.",
                   [](const ops::QueueStatus& q) { return q.rate_burst; });
    optional_gauge(queues, out, "aclaim_queue_rate_tokens",
                   "Whole claims the queue's rate limit bucket holds now.",
                   [](const ops::QueueStatus& q) { return q.rate_tokens; });
}

/// Every queue with work to do, waiting work or settings, deepest first (ties in organization and
/// queue order, as count_queues lists them).
std::vector<ops::QueueStatus> deepest_first(pqxx::transaction_base& txn, base::Instant now) {
    ops::QueueQuery query;
    query.now = now;
    query.states.assign(store::kQueueStates.begin(), store::kQueueStates.end());
    auto queues = ops::count_queues(txn, query);
    std::stable_sort(
        queues.begin(), queues.end(),
        [](const ops::QueueStatus& a, const ops::QueueStatus& b) { return a.pending > b.pending; });
    return queues;
}

}  // namespace

QueueMetrics::QueueMetrics(std::string dsn, const base::Clock& clock)
    : dsn_(std::move(dsn)), clock_(clock) {}

QueueMetrics::~QueueMetrics() = default;

std::string QueueMetrics::render() {
    std::lock_guard lock(mutex_);
    const auto now = clock_.monotonic_now();
    if (!read_at_ || now - *read_at_ >= kRefresh) {
        cached_ = read();
        read_at_ = now;
    }
    return cached_;
}

std::string QueueMetrics::read() {
    std::ostringstream out;
    try {
        if (!conn_) {
            conn_ = std::make_unique<pqxx::connection>(dsn_);
            pqxx::nontransaction session(*conn_);
            session.exec(sql::kMetricsSession);
        }
        pqxx::read_transaction txn(*conn_);
        const auto now = clock_.now();
        const auto all = deepest_first(txn, now);
        const auto shown = std::min(all.size(), static_cast<std::size_t>(QueueMetrics::kMaxSeries));
        out << "# HELP aclaim_queue_stats_up 1 when the per-queue gauges could be read.\n"
               "# TYPE aclaim_queue_stats_up gauge\naclaim_queue_stats_up 1\n";
        out << "# HELP aclaim_queue_series_dropped Queues not exported (beyond the "
            << QueueMetrics::kMaxSeries
            << " deepest).\n# TYPE aclaim_queue_series_dropped gauge\naclaim_queue_series_dropped "
            << (all.size() - shown) << "\n";
        for (const auto& g : kGauges) {
            out << "# HELP " << g.name << " " << g.help << "\n# TYPE " << g.name << " gauge\n";
            for (std::size_t i = 0; i < shown; ++i) {
                const auto& q = all[i];
                // Queue names are [A-Za-z0-9_.:-]: nothing in them needs escaping in a label.
                out << g.name << "{org=\"" << q.org_id << "\",queue=\"" << q.queue << "\"} "
                    << g.value(q, base::to_micros(now)) << "\n";
            }
        }
        rate_gauges(std::span(all).first(shown), out);
        // The consumer groups' gauges are read apart: a failure there (a statement timeout over
        // many groups) leaves the queue gauges above standing.
        std::ostringstream groups;
        out << "# HELP aclaim_result_group_stats_up 1 when the consumer-group gauges could be "
               "read.\n# TYPE aclaim_result_group_stats_up gauge\n";
        try {
            GroupMetrics::read(txn, now, groups);
            out << "aclaim_result_group_stats_up 1\n" << groups.str();
        } catch (const std::exception& e) {
            spdlog::warn("metrics: consumer-group gauges not read: {}", e.what());
            out << "aclaim_result_group_stats_up 0\n";
        }
        // The schedules' gauges: after the groups', which a failure there would leave unread.
        std::ostringstream schedules;
        out << "# HELP aclaim_schedule_stats_up 1 when the schedule gauges could be read.\n"
               "# TYPE aclaim_schedule_stats_up gauge\n";
        try {
            ScheduleMetrics::read(txn, schedules);
            out << "aclaim_schedule_stats_up 1\n" << schedules.str();
        } catch (const std::exception& e) {
            spdlog::warn("metrics: schedule gauges not read: {}", e.what());
            out << "aclaim_schedule_stats_up 0\n";
        }
    } catch (const std::exception& e) {
        conn_.reset();
        spdlog::warn("metrics: per-queue gauges not read: {}", e.what());
        out.str("");
        out << "# HELP aclaim_queue_stats_up 1 when the per-queue gauges could be read.\n"
               "# TYPE aclaim_queue_stats_up gauge\naclaim_queue_stats_up 0\n";
    }
    return out.str();
}

}  // namespace aclaim::coordinator
