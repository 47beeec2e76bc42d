#pragma once

// Jobs and their events as JSON, the same for inspect and jobs list.

#include <nlohmann/json.hpp>

#include "common/ops/operator_store.hpp"

namespace aclaim::ctl {

nlohmann::json job_json(const common::JobRecord& job);
nlohmann::json event_json(const common::AuditEvent& event);

}  // namespace aclaim::ctl
