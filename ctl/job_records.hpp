#pragma once

// Jobs to enqueue, read from a CSV file or JSON lines. Everything is read and checked before the
// first job is written, so a mistake on line 90 000 does not leave half a file enqueued.

#include <cstddef>
#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "common/store/assignment.hpp"

namespace aclaim::ctl {

/// One job to enqueue with where it came from; not a jobs row (see common/ops/job_record.hpp).
struct EnqueueRecord {
    store::OrgId org_id = 0;
    store::NewJob job;
    std::size_t line = 0;  ///< where the record starts in its source, from 1
    /// Which of the lifecycle fields the record set itself: the flags (--queue, --run-at, ...)
    /// fill only the others.
    bool has_queue = false;
    bool has_run_at = false;
    bool has_depends_on = false;
    bool has_on_failure = false;
    bool has_exclude_keys = false;
    bool has_exclude_completers_of = false;
};

/// What a record that leaves a field out gets (from --org, --priority, --max-attempts).
struct RecordDefaults {
    store::OrgId org_id = 0;  ///< 0: every record must name its organization
    int priority = 0;
    std::optional<int> max_attempts;  ///< unset: the queue's setting, then 3
};

/// CSV with a header row naming its columns: payload (required), org (or org_id), priority,
/// max_attempts, queue, dedupe_key, run_at (ISO 8601), depends_on, on_failure (cancel or run),
/// exclude_keys, exclude_completers_of (lists separated by spaces or commas, the latter quoted),
/// in any order; an empty field is one the record does not set. Fields may be quoted ("a ""b"",
/// c"), quoted fields may span lines. Throws UsageError naming the source, the line and what is
/// wrong.
std::vector<EnqueueRecord> read_csv(std::istream& in, const std::string& source,
                                    const RecordDefaults& defaults);

/// One JSON object per line: {"org": 1, "priority": 5, "payload": "...", "max_attempts": 3,
/// "queue": "electrical", "dedupe_key": "order-77", "run_at": "2026-12-01T09:00:00Z",
/// "depends_on": [101, 102], "on_failure": "run", "exclude_keys": ["sparky"],
/// "exclude_completers_of": [101]}.
/// A payload that is not a string is stored as its compact JSON text. Blank lines are skipped.
/// Throws UsageError naming the source, the line and what is wrong.
std::vector<EnqueueRecord> read_jsonl(std::istream& in, const std::string& source,
                                      const RecordDefaults& defaults);

}  // namespace aclaim::ctl
