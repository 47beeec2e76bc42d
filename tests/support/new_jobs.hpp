#pragma once

// Jobs as tests enqueue them, built in one place.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/store/assignment.hpp"

namespace aclaim::testing {

/// A job of `queue` carrying `payload` that waits for `depends_on`, and follows `policy` when
/// one of them fails.
inline store::NewJob workflow_job(
    std::string_view queue, const std::string& payload, std::vector<store::JobId> depends_on = {},
    store::DependencyPolicy policy = store::DependencyPolicy::Cancel) {
    store::NewJob j;
    j.queue = queue;
    j.payload = payload;
    j.depends_on = std::move(depends_on);
    j.on_failure = policy;
    return j;
}

}  // namespace aclaim::testing
