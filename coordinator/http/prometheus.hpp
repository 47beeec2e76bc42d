#pragma once

#include <string>

#include "coordinator/metrics/exposition.hpp"
#include "coordinator/metrics/metrics.hpp"
#include "coordinator/options.hpp"

namespace aclaim::coordinator {

using metrics::kPrometheusContentType;

/// What /metrics serves before the per-queue gauges: every family of `metrics`, then the two
/// gauges that read the options (CURVE on or off, the number of DB threads).
std::string render_prometheus(const Metrics& metrics, const HttpOptions& options);

}  // namespace aclaim::coordinator
