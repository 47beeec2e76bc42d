#pragma once

// Jobs and their events as JSON, the same for inspect and jobs list.

#include <nlohmann/json.hpp>

#include "common/ops/operator_store.hpp"

namespace aclaim::common {

nlohmann::json job_json(const JobRecord& job);
nlohmann::json event_json(const AuditEvent& event);

}  // namespace aclaim::common
