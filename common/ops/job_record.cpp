#include "common/ops/job_record.hpp"

#include <stdexcept>

#include "common/store/pg_field.hpp"

namespace aclaim::ops {

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
    j.id = r["id"].as<store::JobId>();
    j.org_id = r["org_id"].as<store::OrgId>();
    const auto state = r["state"].as<std::string>();
    const auto parsed = store::parse_job_state(state);
    if (!parsed) throw std::runtime_error("unexpected job state '" + state + "'");
    j.state = *parsed;
    j.generation = r["generation"].as<store::Generation>();
    j.priority = r["priority"].as<int>();
    j.base_priority = store::optional_of<int>(r["base_priority"]);
    j.enqueued_at = r["enqueued_us"].as<base::Instant>();
    j.assignee = store::optional_of<std::string>(r["assignee"]);
    j.claimed_at = store::optional_of<base::Instant>(r["claimed_us"]);
    j.lease_expires_at = store::optional_of<base::Instant>(r["lease_us"]);
    j.attempts = r["attempts"].as<int>();
    j.max_attempts = r["max_attempts"].as<int>();
    j.completed_at = store::optional_of<base::Instant>(r["completed_us"]);
    j.result_ref = store::optional_of<std::string>(r["result_ref"]);
    j.last_error = store::optional_of<std::string>(r["last_error"]);
    j.quarantined_from = store::optional_of<std::string>(r["quarantined_from"]);
    j.quarantine_reason = store::optional_of<std::string>(r["quarantine_reason"]);
    j.queue = r["queue"].as<std::string>();
    j.run_at = r["run_at_us"].as<base::Instant>();
    j.deadline = store::optional_of<base::Instant>(r["deadline_us"]);
    j.dedupe_key = store::optional_of<std::string>(r["dedupe_key"]);
    if (has_column(r, "payload")) j.payload = store::optional_of<std::string>(r["payload"]);
    return j;
}

ResultRecord result_record_of(const pqxx::row& r) {
    return {r["job_id"].as<store::JobId>(), r["org_id"].as<store::OrgId>(),
            r["generation"].as<store::Generation>(), r["result_ref"].as<std::string>(),
            r["published_us"].as<base::Instant>()};
}

}  // namespace aclaim::ops
