#include "common/store/new_job_arrays.hpp"

#include <optional>

#include "common/store/pg_array.hpp"

namespace aclaim::store {

namespace {

std::optional<std::int64_t> micros(const std::optional<base::Duration>& d) {
    if (!d) return std::nullopt;
    return d->count();
}

}  // namespace

NewJobArrays new_job_arrays(const std::vector<NewJob>& jobs) {
    std::vector<std::string> queues, payloads;
    std::vector<int> priorities;
    std::vector<std::optional<int>> attempts;
    std::vector<std::optional<std::int64_t>> run_at, base, cap, timeout;
    std::vector<std::optional<std::string>> keys;
    for (const auto& j : jobs) {
        queues.push_back(j.queue);
        payloads.push_back(j.payload);
        priorities.push_back(j.priority);
        attempts.push_back(j.max_attempts);
        run_at.push_back(j.run_at ? std::optional(base::to_micros(*j.run_at)) : std::nullopt);
        base.push_back(micros(j.backoff_base));
        cap.push_back(micros(j.backoff_cap));
        timeout.push_back(micros(j.run_timeout));
        keys.push_back(j.dedupe_key);
    }
    NewJobArrays out{pg_array(queues), pg_array(payloads), pg_array(priorities),
                     pg_array(run_at), pg_array(attempts), pg_array(base),
                     pg_array(cap),    pg_array(timeout),  pg_array(keys),
                     std::nullopt,     std::nullopt,       std::nullopt,
                     std::nullopt,     std::nullopt,       std::nullopt};
    std::vector<int> edge_n;
    std::vector<std::int64_t> edge_on;
    std::vector<std::string> edge_policy;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        for (const JobId on : jobs[i].depends_on) {
            edge_n.push_back(static_cast<int>(i + 1));
            edge_on.push_back(on);
            edge_policy.emplace_back(jobs[i].on_failure == DependencyPolicy::Run ? "run"
                                                                                 : "cancel");
        }
    }
    if (!edge_n.empty()) {
        out.depends_n = pg_array(edge_n);
        out.depends_on = pg_array(edge_on);
        out.on_failure = pg_array(edge_policy);
    }
    std::vector<int> excl_n;
    std::vector<std::optional<std::string>> excl_key;
    std::vector<std::optional<std::int64_t>> excl_job;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        for (const auto& key : jobs[i].exclude_keys) {
            excl_n.push_back(static_cast<int>(i + 1));
            excl_key.emplace_back(key);
            excl_job.emplace_back(std::nullopt);
        }
        for (const JobId of : jobs[i].exclude_completers_of) {
            excl_n.push_back(static_cast<int>(i + 1));
            excl_key.emplace_back(std::nullopt);
            excl_job.emplace_back(of);
        }
    }
    if (!excl_n.empty()) {
        out.exclude_n = pg_array(excl_n);
        out.exclude_keys = pg_array(excl_key);
        out.exclude_jobs = pg_array(excl_job);
    }
    return out;
}

}  // namespace aclaim::store
