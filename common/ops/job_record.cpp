#include "common/ops/job_record.hpp"

#include <stdexcept>

#include "common/store/pg_field.hpp"

namespace aclaim::common {

namespace {

bool has_column(const pqxx::row& row, const char* name) {
    for (pqxx::row::size_type i = 0; i < row.size(); ++i) {
        if (std::string_view(row[i].name()) == name) return true;
    }
    return false;
}

}  // namespace

JobRecord job_record_of(const pqxx::row& r) {
    JobRecord j;
    j.id = r["id"].as<JobId>();
    j.org_id = r["org_id"].as<OrgId>();
    const auto state = r["state"].as<std::string>();
    const auto parsed = parse_job_state(state);
    if (!parsed) throw std::runtime_error("unexpected job state '" + state + "'");
    j.state = *parsed;
    j.generation = r["generation"].as<Generation>();
    j.priority = r["priority"].as<int>();
    j.base_priority = optional_of<int>(r["base_priority"]);
    j.enqueued_at = r["enqueued_us"].as<Instant>();
    j.assignee = optional_of<std::string>(r["assignee"]);
    j.claimed_at = optional_of<Instant>(r["claimed_us"]);
    j.lease_expires_at = optional_of<Instant>(r["lease_us"]);
    j.attempts = r["attempts"].as<int>();
    j.max_attempts = r["max_attempts"].as<int>();
    j.completed_at = optional_of<Instant>(r["completed_us"]);
    j.result_ref = optional_of<std::string>(r["result_ref"]);
    j.last_error = optional_of<std::string>(r["last_error"]);
    j.quarantined_from = optional_of<std::string>(r["quarantined_from"]);
    j.quarantine_reason = optional_of<std::string>(r["quarantine_reason"]);
    j.queue = r["queue"].as<std::string>();
    j.run_at = r["run_at_us"].as<Instant>();
    j.deadline = optional_of<Instant>(r["deadline_us"]);
    j.dedupe_key = optional_of<std::string>(r["dedupe_key"]);
    if (has_column(r, "payload")) j.payload = optional_of<std::string>(r["payload"]);
    return j;
}

ResultRecord result_record_of(const pqxx::row& r) {
    return {r["job_id"].as<JobId>(), r["org_id"].as<OrgId>(), r["generation"].as<Generation>(),
            r["result_ref"].as<std::string>(), r["published_us"].as<Instant>()};
}

}  // namespace aclaim::common
