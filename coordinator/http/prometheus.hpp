#pragma once

#include <string>
#include <string_view>

#include "coordinator/http/metrics.hpp"
#include "coordinator/options.hpp"

namespace aclaim::coordinator {

/// The content type of the Prometheus text exposition format.
inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

/// Every counter, gauge and histogram of `metrics` in the Prometheus text exposition format,
/// each family with its HELP and TYPE lines. Reads atomics only, so it is safe from any thread.
std::string render_prometheus(const Metrics& metrics, const HttpOptions& options);

}  // namespace aclaim::coordinator
