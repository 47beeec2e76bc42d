#pragma once

// One jobs row as the operator side reads it: the console (inspect, jobs list, release, fail),
// the recovery survey and the quarantine commands all use this one shape, read by column name
// from the one column list below.

#include <optional>
#include <pqxx/pqxx>
#include <string>

#include "common/base/clock.hpp"
#include "common/store/assignment.hpp"

namespace aclaim::ops {

/// The durable fields of one jobs row. Two smaller shapes of the same row exist on purpose:
/// RowAuthority (common/store/assignment.hpp) holds only what decides a refusal on the claim
/// path, read inside the fenced transaction, and the checker's JobRow (checker.hpp) holds only
/// what its invariants need, since it reads every row of the table at once.
struct JobRecord {
    store::JobId id = 0;
    store::OrgId org_id = 0;
    store::JobState state = store::JobState::Pending;
    store::Generation generation = 0;
    int priority = 0;
    /// The priority it was enqueued with, when aging raised it since (schema/baseline/tables.sql).
    std::optional<int> base_priority;
    base::Instant enqueued_at{};
    std::optional<std::string> assignee;  ///< empty when nobody holds or held it
    std::optional<base::Instant> claimed_at;
    std::optional<base::Instant> lease_expires_at;
    int attempts = 0;
    int max_attempts = 0;
    std::optional<base::Instant> completed_at;
    std::optional<std::string> result_ref;
    std::optional<std::string> last_error;
    std::optional<std::string> quarantined_from;
    std::optional<std::string> quarantine_reason;
    std::string queue{base::kDefaultQueue};
    base::Instant run_at{};                 ///< not claimable before
    std::optional<base::Instant> deadline;  ///< the current or last attempt's run deadline
    std::optional<std::string> dedupe_key;
    /// Read only for one job or a page of them (kJobColumnsWithPayload): a survey of every row
    /// leaves payloads, which may be large, in the table.
    std::optional<std::string> payload;
};

/// The job_results (outbox) row of a job.
struct ResultRecord {
    store::JobId job_id = 0;
    store::OrgId org_id = 0;
    store::Generation generation = 0;
    std::string result_ref;
    base::Instant published_at{};
};

/// A row selected with sql::kJobColumns (payload read when the row has the column).
JobRecord job_record_of(const pqxx::row& row);
/// A row selected with sql::kResultColumns.
ResultRecord result_record_of(const pqxx::row& row);

}  // namespace aclaim::ops
