#pragma once

// The statements of the coordinator's HTTP side: the readiness probe and the consumer groups'
// gauges of /metrics (the per-queue gauges read ops::count_queues). Time comes in as $n
// microseconds, as in the store.

#include <string>

namespace aclaim::coordinator::sql {

/// The per-queue gauges' session: named, and bounded so that a slow database delays a scrape by
/// at most two seconds.
inline constexpr const char* kMetricsSession =
    "SET application_name = 'aclaim-coordinator-metrics'; SET statement_timeout = '2s'";

/// The readiness probe's session: every statement bounded by `seconds`.
inline std::string readiness_session(int seconds) {
    return "SET statement_timeout = '" + std::to_string(seconds) + "s'";
}

/// $1 series. The schedules due first (paused ones last), with their last and next tick in
/// seconds and how many schedules there are.
inline constexpr const char* kScheduleTicks = R"SQL(
SELECT org_id, name, paused, extract(epoch FROM last_tick_at)::bigint AS last_s,
       extract(epoch FROM next_tick_at)::bigint AS next_s, count(*) OVER () AS total
  FROM schedules
 ORDER BY paused, next_tick_at, org_id, name
 LIMIT $1::int
)SQL";

/// A standby, and a primary an HA manager fenced read-only.
inline constexpr const char* kServerRole =
    "SELECT pg_is_in_recovery(), current_setting('transaction_read_only') = 'on'";

/// The timeline the server is on (it changes at each promotion).
inline constexpr const char* kTimeline = "SELECT aclaim_timeline()";

/// $1 now, $2 series. Per consumer group: verdicts committed and not yet acknowledged, and the
/// age of the oldest of them; the $2 furthest behind, with the number of groups.
inline constexpr const char* kGroupLag = R"SQL(
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

}  // namespace aclaim::coordinator::sql
