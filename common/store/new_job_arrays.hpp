#pragma once

#include <string>
#include <vector>

#include "common/store/assignment.hpp"

namespace aclaim::store {

/// NewJobs as the array parameters of aclaim_enqueue_jobs
/// (schema/definitions/functions/aclaim_enqueue_jobs.sql): one text literal per column, one element
/// per job, NULL where the job leaves the option unset. The store's enqueue and the client
/// library's Producer bind the same arrays.
struct NewJobArrays {
    std::string queues;
    std::string payloads;
    std::string priorities;
    std::string run_at_us;
    std::string max_attempts;
    std::string backoff_base_us;
    std::string backoff_cap_us;
    std::string run_timeout_us;
    std::string dedupe_keys;
    /// The dependencies, one element per edge: job depends_n[i] of the call waits for
    /// depends_on[i] with policy on_failure[i]. All three unset when no job has any, so that an
    /// enqueue without dependencies takes the path that adds no edges.
    std::optional<std::string> depends_n;
    std::optional<std::string> depends_on;
    std::optional<std::string> on_failure;
    /// The exclusions (schema/baseline/tables.sql), one element each: job exclude_n[i] of the call
    /// excludes the reviewer exclude_keys[i] or the completer of exclude_jobs[i] (the other NULL).
    /// All three unset when no job has any, and the enqueue then runs the statement without them.
    std::optional<std::string> exclude_n;
    std::optional<std::string> exclude_keys;
    std::optional<std::string> exclude_jobs;
};

NewJobArrays new_job_arrays(const std::vector<NewJob>& jobs);

}  // namespace aclaim::store
