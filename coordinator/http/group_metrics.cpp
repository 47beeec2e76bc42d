#include "coordinator/http/group_metrics.hpp"

#include "common/store/pg_time.hpp"

namespace aclaim::coordinator {

namespace {

/// $1 now, $2 series.
constexpr const char* kGroupLag = R"SQL(
WITH unsequenced AS (
    SELECT org_id, count(*) AS n, min(at) AS oldest FROM job_outcomes WHERE seq IS NULL
     GROUP BY org_id
), groups AS (
    SELECT g.org_id, g.name,
           greatest(coalesce(h.last_seq, 0) - g.acked, 0) + coalesce(u.n, 0) AS lag,
           least((SELECT o.at FROM job_outcomes o
                   WHERE o.org_id = g.org_id AND o.seq > g.acked ORDER BY o.seq LIMIT 1),
                 u.oldest) AS oldest
      FROM result_groups g
      LEFT JOIN result_heads h USING (org_id)
      LEFT JOIN unsequenced u USING (org_id)
)
SELECT org_id, name, lag,
       CASE WHEN oldest IS NULL THEN 0 ELSE greatest(0, $1::bigint - aclaim_us(oldest)) END
           AS oldest_us,
       count(*) OVER () AS total
  FROM groups ORDER BY lag DESC, org_id, name LIMIT $2::int
)SQL";

}  // namespace

void GroupMetrics::read(pqxx::transaction_base& txn, common::Instant now, std::ostream& out) {
    const auto rows = txn.exec_params(kGroupLag, now, kMaxSeries);
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
