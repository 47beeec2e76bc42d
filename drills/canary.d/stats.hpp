#pragma once

// What the synthetic pollers see, collected per one-second interval: claim round trips, NO_WORK
// replies by reason, renewals, completions, rejections and revocations by reason, and any
// (job, generation) handed out twice. Pollers write from their threads; the run loop takes one
// interval's worth at each boundary.

#include <cmath>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace aclaim::drills {

/// Nearest-rank percentiles of a sample, in milliseconds.
struct LatencySummary {
    std::size_t count = 0;
    double p50_ms = 0;
    double p90_ms = 0;
    double p99_ms = 0;
    double max_ms = 0;
};

LatencySummary summarize(std::vector<double> samples_ms);

/// The nearest-rank q-quantile (0 < q <= 1) of an ascending sample; 0 for an empty one.
template <class T>
T quantile(const std::vector<T>& sorted, double q) {
    if (sorted.empty()) return T{};
    // The epsilon keeps q * n that is an integer in exact arithmetic from rounding up.
    auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size()) - 1e-9));
    if (rank < 1) rank = 1;
    if (rank > sorted.size()) rank = sorted.size();
    return sorted[rank - 1];
}

/// One interval of what the pollers saw.
struct PollerCounts {
    std::vector<double> claim_ms;  ///< round trip of each CLAIM answered ASSIGNED
    std::int64_t jobs_assigned = 0;
    std::int64_t no_work = 0;
    std::map<std::string, std::int64_t> no_work_by_reason;
    std::int64_t claim_errors = 0;  ///< CLAIMs ended by ERROR or a lost connection
    std::int64_t renewals = 0;      ///< LEASE replies
    std::int64_t completions = 0;   ///< COMPLETEs accepted, replays included
    std::int64_t replayed = 0;
    std::map<std::string, std::int64_t> rejections_by_reason;   ///< COMPLETE refused
    std::map<std::string, std::int64_t> revocations_by_reason;  ///< job taken away
    std::int64_t duplicate_assignments = 0;  ///< a (job, generation) handed out before
    std::vector<std::string> duplicate_evidence;

    /// Adds another interval's counts (for totals).
    void add(const PollerCounts& other);
};

class Recorder {
  public:
    void assigned(double round_trip_ms, std::int64_t job, std::int64_t generation, int poller);
    void no_work(const std::string& reason);
    void claim_error();
    void renewals(std::int64_t n);
    void completed(bool replayed);
    void rejected(const std::string& reason);
    void revoked(const std::string& reason);

    /// The counts since the last take, and a fresh interval.
    PollerCounts take();

  private:
    std::mutex mutex_;
    PollerCounts current_;
    /// Every (job, generation) handed out this run and the poller it went to.
    std::map<std::pair<std::int64_t, std::int64_t>, int> granted_;
};

}  // namespace aclaim::drills
