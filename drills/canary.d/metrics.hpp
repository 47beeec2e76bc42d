#pragma once

// The coordinator's own timing, read from its Prometheus endpoint (/metrics on --http-bind): the
// claim statement histogram (`aclaim_statement_duration_seconds{statement="claim"}`, one store
// call on a DB thread) and the CLAIM service histogram (`aclaim_claim_duration_seconds`: queue
// wait, statement, commit, without long-poll parking). Each interval is the difference of two
// scrapes; its percentiles are the upper bounds of the buckets they fall in.

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace aclaim::drills {

/// Cumulative bucket counts of one histogram series, by upper bound in seconds (+Inf last).
struct BucketCounts {
    std::vector<double> upper_s;
    std::vector<double> cumulative;

    /// Counts since `earlier` (a scrape of the same series); empty when the bounds differ.
    BucketCounts since(const BucketCounts& earlier) const;
    double count() const { return cumulative.empty() ? 0 : cumulative.back(); }
    /// The upper bound, in milliseconds, of the bucket holding the q-quantile; 0 when empty and
    /// infinity when it lies in the +Inf bucket.
    double quantile_ms(double q) const;
};

/// Histogram series of one scrape, keyed by `name{labels}` without the le label.
using Scrape = std::map<std::string, BucketCounts>;

/// Parses Prometheus text exposition, keeping only `_bucket` series.
Scrape parse_histograms(const std::string& text);

/// GET http://127.0.0.1:port/metrics with a short timeout; nullopt when it cannot be read.
std::optional<std::string> fetch_metrics(int port);

inline constexpr const char* kClaimStatementSeries =
    "aclaim_statement_duration_seconds{statement=\"claim\"}";
inline constexpr const char* kClaimServiceSeries = "aclaim_claim_duration_seconds";

/// Statement timing of one interval as the coordinator saw it.
struct CoordinatorTiming {
    bool available = false;  ///< both scrapes were read and held the series
    double statements = 0;   ///< claim statements run
    double statement_p50_ms = 0, statement_p99_ms = 0;
    double service_p50_ms = 0, service_p99_ms = 0;
};

CoordinatorTiming timing_between(const Scrape& earlier, const Scrape& later);

}  // namespace aclaim::drills
