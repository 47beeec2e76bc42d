#include "coordinator/http/group_metrics.hpp"

#include "common/store/pg_time.hpp"
#include "coordinator/http/http_sql.hpp"

namespace aclaim::coordinator {

void GroupMetrics::read(pqxx::transaction_base& txn, base::Instant now, std::ostream& out) {
    const auto rows = txn.exec_params(sql::kGroupLag, now, kMaxSeries);
    const long total = rows.empty() ? 0 : rows[0]["total"].as<long>();
    out << "# HELP aclaim_result_group_series_dropped Consumer groups not exported (beyond the "
        << kMaxSeries
        << " furthest behind).\n# TYPE aclaim_result_group_series_dropped gauge\n"
           "aclaim_result_group_series_dropped "
        << (total - static_cast<long>(rows.size())) << "\n";
    out << "# HELP aclaim_result_group_lag Verdicts committed and not yet acknowledged by the "
           "group.\n# TYPE aclaim_result_group_lag gauge\n";
    // Group names are [A-Za-z0-9_.:-]: nothing in them needs escaping in a label.
    for (const auto& r : rows) {
        out << "aclaim_result_group_lag{org=\"" << r["org_id"].as<long>() << "\",group=\""
            << r["name"].c_str() << "\"} " << r["lag"].as<long>() << "\n";
    }
    out << "# HELP aclaim_result_group_oldest_unacked_seconds How long ago the oldest verdict the "
           "group has not acknowledged was committed.\n"
           "# TYPE aclaim_result_group_oldest_unacked_seconds gauge\n";
    for (const auto& r : rows) {
        out << "aclaim_result_group_oldest_unacked_seconds{org=\"" << r["org_id"].as<long>()
            << "\",group=\"" << r["name"].c_str() << "\"} "
            << static_cast<double>(r["oldest_us"].as<long>()) * 1e-6 << "\n";
    }
}

}  // namespace aclaim::coordinator
