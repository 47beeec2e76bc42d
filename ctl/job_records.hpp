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
    common::OrgId org_id = 0;
    common::NewJob job;
    std::size_t line = 0;  ///< where the record starts in its source, from 1
};

/// What a record that leaves a field out gets (from --org, --priority, --max-attempts).
struct RecordDefaults {
    common::OrgId org_id = 0;  ///< 0: every record must name its organization
    int priority = 0;
    std::optional<int> max_attempts;  ///< unset: the queue's setting, then 3
};

/// CSV with a header row naming its columns: payload (required), org (or org_id), priority,
/// max_attempts, in any order. Fields may be quoted ("a ""b"", c"), quoted fields may span lines.
/// Throws UsageError naming the source, the line and what is wrong.
std::vector<EnqueueRecord> read_csv(std::istream& in, const std::string& source,
                                    const RecordDefaults& defaults);

/// One JSON object per line: {"org": 1, "priority": 5, "payload": "...", "max_attempts": 3}.
/// A payload that is not a string is stored as its compact JSON text. Blank lines are skipped.
/// Throws UsageError naming the source, the line and what is wrong.
std::vector<EnqueueRecord> read_jsonl(std::istream& in, const std::string& source,
                                      const RecordDefaults& defaults);

}  // namespace aclaim::ctl
