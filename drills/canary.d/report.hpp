#pragma once

// The canary's report: report.json (settings, per-interval series, totals, contract verdict,
// violations with the level backed off to), report.md (summary tables) and chart.svg (pollers,
// claims/s and claim p99 latency over time), all in one folder.

#include <nlohmann/json.hpp>
#include <string>

#include "drills/canary.d/run.hpp"

namespace aclaim::drills {

/// Said in words in every report.
inline constexpr const char* kNoGuarantee =
    "This canary measures behaviour: how the assignment contract, claim latency and lock waits "
    "respond to the declared load on this machine and this database. It makes no throughput "
    "guarantee; another machine, database, lease or load will give other numbers.";

nlohmann::ordered_json report_json(const RunResult& run);
std::string report_markdown(const RunResult& run);
std::string chart_svg(const RunResult& run);

/// Writes report.json, report.md and chart.svg into `dir` (which must exist).
void write_report(const RunResult& run, const std::string& dir);

/// One line for the terminal about an interval.
std::string progress_line(const RunResult& run, const Interval& interval);

}  // namespace aclaim::drills
