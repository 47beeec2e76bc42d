#pragma once

// Retention as an operator sees it (`aclaimctl retention`): what a pass would remove, what the
// prune ledger recorded, the partitions of job_events, and their archiving: detach (without
// stopping inserts), write the archive (common/ops/event_archive.hpp), verify it, drop.

#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "common/base/clock.hpp"
#include "common/store/assignment.hpp"

namespace aclaim::ops {

/// What a prune pass at some instant would remove from one queue, in one state.
struct PrunePreview {
    store::OrgId org_id = 0;
    std::string queue;
    std::string state;
    std::int64_t prunable = 0;
    base::Instant oldest{};  ///< the earliest completed_at among them
    base::Duration kept{};   ///< the retention in force
};

/// The prune ledger of one organization.
struct PruneTotals : store::Pruned {
    std::int64_t batches = 0;
    base::Instant last{};
};

/// One partition of job_events, from the registry (job_event_partitions).
struct EventPartition {
    std::string name;
    std::optional<base::Instant> from;  ///< none: open lower bound
    base::Instant to{};
    std::string state;                           ///< attached, detaching, archived, dropped
    std::optional<std::int64_t> rows;            ///< counted when archived
    std::optional<std::int64_t> estimated_rows;  ///< the planner's, while the table exists
    bool never_analyzed = false;        ///< the table exists but has no estimate yet (none, not 0)
    std::optional<std::int64_t> bytes;  ///< table and indexes, while it exists
    std::string archive_file;
    std::string sha256;
};

struct TableSize {
    std::string name;
    std::int64_t table_bytes = 0;
    std::int64_t index_bytes = 0;
};

struct ArchiveOptions {
    /// Where archives are written (created if missing); one file per partition.
    std::string dir;
    /// A partition is archived once it ended this long ago.
    base::Duration older_than = std::chrono::hours(24 * 90);
    /// Say what would be done, change nothing.
    bool dry_run = false;
};

/// What an archive run did with one partition that was due.
struct ArchiveOutcome {
    std::string partition;
    /// archived (detached, written, verified, dropped), would_archive (dry run), held (a job
    /// that still exists has events in it), unaccounted (a job with events in it has no row
    /// and no prune record), or failed.
    std::string action;
    std::string detail;
    std::string file;
    std::int64_t rows = 0;
};

/// Removes at most `batch` counts of refused park callbacks (park_refusal_counts) whose hour
/// ended their keep, 30 days, before `now`; returns how many, in a transaction of its own on
/// `conn`. The coordinators' retention pass calls it until a call comes back short, which keeps
/// the table within its bound (schema/baseline/tables.sql) however many callbacks are refused.
int prune_park_refusals(pqxx::connection& conn, base::Instant now, int batch);

class RetentionStore {
  public:
    /// The connection must belong to the owner of job_events to archive (DETACH, DROP); the
    /// reads need no more than SELECT.
    explicit RetentionStore(pqxx::connection& conn) : conn_(conn) {}

    std::vector<PrunePreview> preview(base::Instant now);
    std::vector<PruneTotals> ledger();
    std::vector<EventPartition> partitions();
    std::vector<TableSize> table_sizes();
    /// When retention removed the job, and from which organization; none if it never did.
    std::optional<std::pair<store::OrgId, base::Instant>> pruned(store::JobId job);

    /// Archives every partition that ended options.older_than before now, oldest first:
    /// refuses one that a still existing job has events in, or whose events name a job that is
    /// neither there nor recorded as pruned; otherwise DETACH ... CONCURRENTLY, writes
    /// <dir>/<partition>.events.jsonl (written to a temporary name, synced, renamed), reads it
    /// back and verifies it, records it in job_event_partitions, and drops the table. Resumes a
    /// run that stopped after any step. A failure stops the run at that partition.
    std::vector<ArchiveOutcome> archive(const ArchiveOptions& options, base::Instant now);

  private:
    ArchiveOutcome archive_one(const EventPartition& p, const ArchiveOptions& options,
                               base::Instant now);

    pqxx::connection& conn_;
};

}  // namespace aclaim::ops
