#include "common/ops/job_record.hpp"

#include <stdexcept>

#include "common/store/pg_time.hpp"

namespace aclaim::common {

namespace {

template <typename T>
std::optional<T> opt(const pqxx::field& f) {
    if (f.is_null()) return std::nullopt;
    return f.as<T>();
}

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
    j.enqueued_at = r["enqueued_us"].as<Instant>();
    j.assignee = opt<std::string>(r["assignee"]);
    j.claimed_at = opt<Instant>(r["claimed_us"]);
    j.lease_expires_at = opt<Instant>(r["lease_us"]);
    j.attempts = r["attempts"].as<int>();
    j.max_attempts = r["max_attempts"].as<int>();
    j.completed_at = opt<Instant>(r["completed_us"]);
    j.result_ref = opt<std::string>(r["result_ref"]);
    j.last_error = opt<std::string>(r["last_error"]);
    j.quarantined_from = opt<std::string>(r["quarantined_from"]);
    j.quarantine_reason = opt<std::string>(r["quarantine_reason"]);
    j.queue = r["queue"].as<std::string>();
    j.run_at = r["run_at_us"].as<Instant>();
    j.deadline = opt<Instant>(r["deadline_us"]);
    j.dedupe_key = opt<std::string>(r["dedupe_key"]);
    if (has_column(r, "payload")) j.payload = opt<std::string>(r["payload"]);
    return j;
}

ResultRecord result_record_of(const pqxx::row& r) {
    return {r["job_id"].as<JobId>(), r["org_id"].as<OrgId>(), r["generation"].as<Generation>(),
            r["result_ref"].as<std::string>(), r["published_us"].as<Instant>()};
}

}  // namespace aclaim::common
