#pragma once

#include <ostream>
#include <pqxx/pqxx>

#include "common/base/clock.hpp"

namespace aclaim::coordinator {

/// The consumer groups' gauges of /metrics, read in QueueMetrics' transaction and refresh: per
/// organization and group, the outcomes not acknowledged yet (aclaim_result_group_lag) and how
/// long ago the oldest of them ended. Label cardinality is bounded like the queues': the
/// kMaxSeries groups furthest behind are exported, the rest counted in
/// aclaim_result_group_series_dropped. Reads result_groups, result_heads, one index probe per
/// group and the outcomes not yet given a position (few: every fetch gives them one).
class GroupMetrics {
  public:
    static constexpr int kMaxSeries = 50;

    static void read(pqxx::transaction_base& txn, base::Instant now, std::ostream& out);
};

}  // namespace aclaim::coordinator
