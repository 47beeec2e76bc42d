#include "coordinator/http/schedule_metrics.hpp"

#include <string>
#include <vector>

#include "coordinator/http/http_sql.hpp"

namespace aclaim::coordinator {

namespace {
struct Row {
    std::string labels;
    bool paused = false;
    std::string last;  ///< seconds, or empty
    std::string next;
};
}  // namespace

void ScheduleMetrics::read(pqxx::transaction_base& txn, std::ostream& out) {
    std::vector<Row> rows;
    std::int64_t total = 0;
    for (const auto& r : txn.exec_params(sql::kScheduleTicks, kMaxSeries)) {
        total = r["total"].as<std::int64_t>();
        Row row;
        // Schedule names are [A-Za-z0-9_.:-]: nothing in them needs escaping in a label.
        row.labels = "{org=\"" + r["org_id"].as<std::string>() + "\",schedule=\"" +
                     r["name"].as<std::string>() + "\"}";
        row.paused = r["paused"].as<bool>();
        if (!r["last_s"].is_null()) row.last = r["last_s"].as<std::string>();
        row.next = r["next_s"].as<std::string>();
        rows.push_back(std::move(row));
    }
    out << "# HELP aclaim_schedule_last_tick_seconds The schedule's last tick enqueued, seconds "
           "since the epoch.\n# TYPE aclaim_schedule_last_tick_seconds gauge\n";
    for (const auto& r : rows) {
        if (!r.last.empty())
            out << "aclaim_schedule_last_tick_seconds" << r.labels << " " << r.last << "\n";
    }
    out << "# HELP aclaim_schedule_next_tick_seconds The schedule's next tick, seconds since the "
           "epoch (none while paused).\n# TYPE aclaim_schedule_next_tick_seconds gauge\n";
    for (const auto& r : rows) {
        if (!r.paused)
            out << "aclaim_schedule_next_tick_seconds" << r.labels << " " << r.next << "\n";
    }
    out << "# HELP aclaim_schedule_paused 1 while an operator has paused the schedule.\n"
           "# TYPE aclaim_schedule_paused gauge\n";
    for (const auto& r : rows) {
        out << "aclaim_schedule_paused" << r.labels << " " << (r.paused ? 1 : 0) << "\n";
    }
    out << "# HELP aclaim_schedule_series_dropped Schedules not exported (beyond the " << kMaxSeries
        << " due first).\n# TYPE aclaim_schedule_series_dropped "
           "gauge\naclaim_schedule_series_dropped "
        << (total - static_cast<std::int64_t>(rows.size())) << "\n";
}

}  // namespace aclaim::coordinator
