#pragma once

// Jobs and their events as JSON, the same for inspect and jobs list; a checker report, the same
// for `aclaimctl check` and the console.

#include <nlohmann/json.hpp>

#include "common/ops/checker.hpp"
#include "common/ops/operator_store.hpp"

namespace aclaim::ops {

nlohmann::json job_json(const JobRecord& job);
nlohmann::json event_json(const store::AuditEvent& event);
/// A job's saved progress (protocol 1.5), the same for inspect and the console's job view.
nlohmann::json progress_json(const ProgressRecord& progress);
/// A job's latest park (protocol 1.6), the same for inspect and the console's job view.
nlohmann::json park_json(const ParkRecord& park);
/// A job's exclusions, the same for inspect and the console's job view: "reviewers" (names) and
/// "completers_of" (each {job, state, completer}).
nlohmann::json exclusions_json(const std::vector<ExclusionRecord>& exclusions);
/// A job's dependencies both ways and its exclusions, for `aclaimctl inspect --json`.
nlohmann::json links_json(const JobLinks& links);
/// A backlog's drain rate, the same for `aclaimctl status --json` and the console's overview:
/// pending, completed_last_minute, rate_per_s and time_left_ms (null while the rate is 0).
nlohmann::json drain_json(const DrainRate& rate);
/// The count of every job state, under the state's name (kJobStates): the same members in
/// `aclaimctl status --json` (per organization) and `aclaimctl queue list --json` (per queue).
nlohmann::json state_counts_json(const OrgStatus& status);
nlohmann::json state_counts_json(const QueueStatus& status);
/// The counts and every violation of a check.
nlohmann::json check_report_json(const CheckReport& report);

}  // namespace aclaim::ops
