#include "coordinator/http/queue_metrics.hpp"

#include <spdlog/spdlog.h>

#include <pqxx/pqxx>
#include <sstream>

#include "common/store/pg_time.hpp"
#include "coordinator/http/group_metrics.hpp"

namespace aclaim::coordinator {

namespace {

/// $1 now, $2 series. Every state counted through its own partial index.
constexpr const char* kQueueStats = R"SQL(
WITH pending AS (
    SELECT org_id, queue, count(*) AS depth, min(run_at) AS oldest
      FROM jobs WHERE state = 'pending' GROUP BY org_id, queue
), scheduled AS (
    SELECT org_id, queue, count(*) AS n FROM jobs WHERE state = 'scheduled' GROUP BY org_id, queue
), assigned AS (
    SELECT org_id, queue, count(*) AS n FROM jobs WHERE state = 'assigned' GROUP BY org_id, queue
), discarded AS (
    SELECT org_id, queue, count(*) AS n FROM jobs WHERE state = 'discarded' GROUP BY org_id, queue
), all_queues AS (
    SELECT org_id, queue, coalesce(p.depth, 0) AS depth,
           CASE WHEN p.oldest IS NULL THEN 0
                ELSE greatest(0, $1::bigint - aclaim_us(p.oldest)) END AS oldest_us,
           coalesce(s.n, 0) AS scheduled, coalesce(a.n, 0) AS assigned,
           coalesce(d.n, 0) AS discarded, coalesce(q.paused, false) AS paused
      FROM pending p
      FULL JOIN scheduled s USING (org_id, queue)
      FULL JOIN assigned a USING (org_id, queue)
      FULL JOIN discarded d USING (org_id, queue)
      FULL JOIN job_queues q USING (org_id, queue)
)
SELECT *, count(*) OVER () AS total FROM all_queues
 ORDER BY depth DESC, org_id, queue LIMIT $2::int
)SQL";

struct Gauge {
    const char* name;
    const char* help;
    const char* column;
    double scale;
};

constexpr Gauge kGauges[] = {
    {"aclaim_queue_depth", "Pending (claimable) jobs.", "depth", 1},
    {"aclaim_queue_oldest_pending_seconds", "How long the oldest pending job has been claimable.",
     "oldest_us", 1e-6},
    {"aclaim_queue_scheduled", "Jobs waiting for their run_at (delays and retry backoffs).",
     "scheduled", 1},
    {"aclaim_queue_assigned", "Jobs leased out.", "assigned", 1},
    {"aclaim_queue_discarded", "Jobs whose every attempt was used up, waiting for a person.",
     "discarded", 1},
    {"aclaim_queue_paused", "1 while an operator has paused the queue.", "paused", 1},
};

}  // namespace

QueueMetrics::QueueMetrics(std::string dsn, const common::Clock& clock)
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
            session.exec(
                "SET application_name = 'aclaim-coordinator-metrics'; "
                "SET statement_timeout = '2s'");
        }
        pqxx::read_transaction txn(*conn_);
        const auto now = clock_.now();
        const auto rows = txn.exec_params(kQueueStats, now, QueueMetrics::kMaxSeries);
        out << "# HELP aclaim_queue_stats_up 1 when the per-queue gauges could be read.\n"
               "# TYPE aclaim_queue_stats_up gauge\naclaim_queue_stats_up 1\n";
        const long total = rows.empty() ? 0 : rows[0]["total"].as<long>();
        out << "# HELP aclaim_queue_series_dropped Queues not exported (beyond the "
            << QueueMetrics::kMaxSeries
            << " deepest).\n# TYPE aclaim_queue_series_dropped gauge\naclaim_queue_series_dropped "
            << (total - static_cast<long>(rows.size())) << "\n";
        for (const auto& g : kGauges) {
            out << "# HELP " << g.name << " " << g.help << "\n# TYPE " << g.name << " gauge\n";
            for (const auto& r : rows) {
                const double value = std::string(g.column) == "paused"
                                         ? (r["paused"].as<bool>() ? 1 : 0)
                                         : r[g.column].as<double>() * g.scale;
                // Queue names are [A-Za-z0-9_.:-]: nothing in them needs escaping in a label.
                out << g.name << "{org=\"" << r["org_id"].as<long>() << "\",queue=\""
                    << r["queue"].c_str() << "\"} " << value << "\n";
            }
        }
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
