#pragma once

#include <string>
#include <string_view>

#include "coordinator/metrics/family.hpp"

namespace aclaim::coordinator::metrics {

/// The content type of the Prometheus text exposition format.
inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

/// Every family of `registry` in the Prometheus text exposition format, in declaration order,
/// each with its HELP and TYPE lines before its samples. Reads atomics only, so it is safe from
/// any thread.
std::string exposition(const Registry& registry);

}  // namespace aclaim::coordinator::metrics
