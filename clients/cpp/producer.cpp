#include "clients/cpp/producer.hpp"

#include <stdexcept>

#include "clients/cpp/client_sql.hpp"
#include "common/store/new_job_arrays.hpp"
#include "common/store/pg_array.hpp"
#include "common/store/pg_field.hpp"

namespace aclaim::clients {

store::Enqueued Producer::enqueue(pqxx::transaction_base& txn, const store::NewJob& job) const {
    return enqueue_many(txn, {job}).at(0);
}

std::vector<store::Enqueued> Producer::enqueue_many(pqxx::transaction_base& txn,
                                                    const std::vector<store::NewJob>& jobs) const {
    if (jobs.empty()) return {};
    const auto a = store::new_job_arrays(jobs);
    const auto rows = txn.exec_params(sql::kEnqueue.text, a.payloads, a.queues, a.priorities,
                                      a.run_at_us, a.dedupe_keys, a.max_attempts, a.run_timeout_us,
                                      a.backoff_base_us, a.backoff_cap_us, options_.dedupe_window,
                                      options_.org, clock_->now(), a.depends_n, a.depends_on,
                                      a.on_failure, a.exclude_n, a.exclude_keys, a.exclude_jobs);
    std::vector<store::Enqueued> out;
    out.reserve(rows.size());
    for (const auto& r : rows) {
        out.push_back(
            {r["id"].as<store::JobId>(), r["created"].as<bool>(), store::job_state_of(r["state"])});
    }
    return out;
}

std::vector<CancelledJob> Producer::cancel(pqxx::transaction_base& txn,
                                           const std::vector<store::JobId>& ids,
                                           const std::string& reason) const {
    std::vector<CancelledJob> out;
    for (const auto& r : txn.exec_params(sql::kCancel.text, store::pg_array(ids), reason,
                                         options_.org, clock_->now())) {
        out.push_back({r["id"].as<store::JobId>(), store::job_state_of(r["was"])});
    }
    return out;
}

std::vector<JobStatus> Producer::status(pqxx::transaction_base& txn,
                                        const std::vector<store::JobId>& ids,
                                        const std::vector<std::string>& dedupe_keys) const {
    std::vector<JobStatus> out;
    for (const auto& r : txn.exec_params(sql::kStatus.text, store::pg_array(ids),
                                         store::pg_array(dedupe_keys), options_.org)) {
        JobStatus s;
        s.id = r["id"].as<store::JobId>();
        s.queue = r["queue"].as<std::string>();
        s.state = store::job_state_of(r["state"]);
        s.priority = r["priority"].as<int>();
        s.attempts = r["attempts"].as<int>();
        s.max_attempts = r["max_attempts"].as<int>();
        s.dedupe_key = store::optional_of<std::string>(r["dedupe_key"]);
        s.enqueued_at = r["enqueued_us"].as<base::Instant>();
        s.run_at = r["run_at_us"].as<base::Instant>();
        s.finished_at = store::optional_of<base::Instant>(r["finished_us"]);
        s.result_ref = store::optional_of<std::string>(r["result_ref"]);
        s.last_error = store::optional_of<std::string>(r["last_error"]);
        out.push_back(std::move(s));
    }
    return out;
}

}  // namespace aclaim::clients
