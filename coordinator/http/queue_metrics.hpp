#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <string>

#include "common/base/clock.hpp"

namespace aclaim::coordinator {

/// The per-queue gauges of /metrics: depth (pending), oldest pending age, scheduled, assigned,
/// discarded and paused, per organization and queue. Read from the database on a connection of
/// its own, at most once per kRefresh however often Prometheus scrapes, through the count every
/// per-queue view shares (ops::count_queues over store::kQueueStates): index probes of the
/// index that holds each of those states (schema/baseline/tables.sql), never the finished rows.
/// Label cardinality is bounded: the kMaxSeries deepest queues are exported, the rest counted in
/// aclaim_queue_series_dropped. The consumer groups' lag (GroupMetrics) is read in the same
/// transaction.
class QueueMetrics {
  public:
    static constexpr auto kRefresh = std::chrono::seconds(5);
    static constexpr int kMaxSeries = 50;

    QueueMetrics(std::string dsn, const base::Clock& clock);
    ~QueueMetrics();
    QueueMetrics(const QueueMetrics&) = delete;
    QueueMetrics& operator=(const QueueMetrics&) = delete;

    /// The gauges in the Prometheus text format; "aclaim_queue_stats_up 0" alone when the
    /// database could not be read. Any thread.
    std::string render();

  private:
    std::string read();

    std::string dsn_;
    const base::Clock& clock_;
    std::mutex mutex_;
    std::unique_ptr<pqxx::connection> conn_;
    std::optional<base::MonotonicTime> read_at_;
    std::string cached_;
};

}  // namespace aclaim::coordinator
