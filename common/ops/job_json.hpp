#pragma once

// Jobs and their events as JSON, the same for inspect and jobs list; a checker report, the same
// for `aclaimctl check` and the console.

#include <nlohmann/json.hpp>

#include "common/ops/checker.hpp"
#include "common/ops/operator_store.hpp"

namespace aclaim::common {

nlohmann::json job_json(const JobRecord& job);
nlohmann::json event_json(const AuditEvent& event);
/// A job's saved progress (protocol 1.5), the same for inspect and the console's job view.
nlohmann::json progress_json(const ProgressRecord& progress);
/// A job's latest park (protocol 1.6), the same for inspect and the console's job view.
nlohmann::json park_json(const ParkRecord& park);
/// The counts and every violation of a check.
nlohmann::json check_report_json(const CheckReport& report);

}  // namespace aclaim::common
