#pragma once

// The statements of `aclaimctl retention`: the preview of what retention would remove, the
// prune ledger's totals, the partitions of job_events and the archive's steps. Like the
// console's they run unprepared on the operator's connection; time arrives as $n microseconds.
// {PARTITION} is a partition's name, quoted as an identifier by the caller; names come from
// job_event_partitions, never from a person.

#include "common/store/statement.hpp"

namespace aclaim::ops::sql {

using store::sql::Statement;

/// $1 now. What a prune pass at now would remove, per organization, queue and state, decided by
/// the one predicate aclaim_job_prunable. Reads every finished row: an operator's preview.
inline const Statement kRetentionPreview{"aclaim_retention_preview",
                                         R"SQL(
SELECT j.org_id, j.queue, j.state, count(*) AS prunable,
       aclaim_us(min(j.completed_at)) AS oldest_us,
       aclaim_retention_us(j.org_id, j.queue, j.state) AS keep_us
  FROM jobs j
 WHERE j.state IN ('completed', 'failed', 'discarded', 'cancelled')
   AND aclaim_job_prunable(j, $1::bigint)
 GROUP BY j.org_id, j.queue, j.state
 ORDER BY j.org_id, j.queue, j.state
)SQL",
                                         {"now_us bigint"}};

/// The prune ledger per organization: batches, jobs by state, results, the last batch.
inline const Statement kRetentionLedger{"aclaim_retention_ledger",
                                        R"SQL(
SELECT org_id, count(*) AS batches, sum(completed) AS completed, sum(failed) AS failed,
       sum(discarded) AS discarded, sum(cancelled) AS cancelled, sum(results) AS results,
       aclaim_us(max(pruned_at)) AS last_us
  FROM job_prunes GROUP BY org_id ORDER BY org_id
)SQL",
                                        {}};

/// Every partition the registry knows, oldest first, with its size while its table exists.
/// estimated_rows is -1 for a table never analyzed (PostgreSQL 14 on), not 0: a month of events
/// must not read as an empty one.
inline const Statement kEventPartitions{"aclaim_event_partitions",
                                        R"SQL(
SELECT p.name, aclaim_us(p.from_at) AS from_us, aclaim_us(p.to_at) AS to_us, p.state,
       p.rows, coalesce(p.archive_file, '') AS archive_file, coalesce(p.sha256, '') AS sha256,
       aclaim_us(p.archived_at) AS archived_us,
       pg_total_relation_size(to_regclass(p.name)) AS bytes,
       (SELECT c.reltuples::bigint FROM pg_class c
         WHERE c.oid = to_regclass(p.name)) AS estimated_rows
  FROM job_event_partitions p
 ORDER BY p.to_at
)SQL",
                                        {}};

/// The three tables retention keeps in bounds, each with its indexes apart (job_events summed
/// over its attached partitions).
inline const Statement kRetentionTableSizes{"aclaim_retention_table_sizes",
                                            R"SQL(
SELECT 'jobs' AS name, pg_table_size('jobs') AS table_bytes,
       pg_indexes_size('jobs') AS index_bytes
UNION ALL
SELECT 'job_events', coalesce(sum(pg_table_size(relid)), 0)::bigint,
       coalesce(sum(pg_indexes_size(relid)), 0)::bigint
  FROM pg_partition_tree('job_events') WHERE isleaf
UNION ALL
SELECT 'job_outcomes', pg_table_size('job_outcomes'), pg_indexes_size('job_outcomes')
UNION ALL
SELECT 'park_refusal_counts', pg_table_size('park_refusal_counts'),
       pg_indexes_size('park_refusal_counts')
)SQL",
                                            {}};

/// $1 now, $2 age. The partitions that ended at least `age` before now and are not dropped yet,
/// oldest first: what an archive run goes through.
inline const Statement kPartitionsDue{"aclaim_partitions_due",
                                      R"SQL(
SELECT name, aclaim_us(from_at) AS from_us, aclaim_us(to_at) AS to_us, state,
       coalesce(archive_file, '') AS archive_file, coalesce(sha256, '') AS sha256
  FROM job_event_partitions
 WHERE state <> 'dropped' AND to_at <= aclaim_ts($1::bigint - $2::bigint)
 ORDER BY to_at
)SQL",
                                      {"now_us bigint", "age_us bigint"}};

/// Jobs that still exist and have events in the partition: while there is one, the partition
/// stays (a quarantined job, or one kept by its retention, keeps its whole history). One probe
/// of the partition's (job_id, id) index per job row.
inline constexpr const char* kPartitionHolders = R"SQL(
SELECT j.id, j.state FROM jobs j
 WHERE EXISTS (SELECT 1 FROM {PARTITION} e WHERE e.job_id = j.id)
 ORDER BY j.id LIMIT 5
)SQL";

/// Job ids with events in the partition that have no row and no prune record: lost, by the
/// checker's reading. Archiving them would hide the evidence, so the partition stays.
inline constexpr const char* kPartitionUnaccounted = R"SQL(
WITH pruned AS (SELECT coalesce(range_agg(jobs), '{}'::int8multirange) AS ids FROM job_prunes)
SELECT DISTINCT e.job_id FROM {PARTITION} e, pruned
 WHERE NOT (pruned.ids @> e.job_id)
 ORDER BY e.job_id LIMIT 5
)SQL";

/// $1 name. NULL: the table is not a partition of job_events (detached, or gone); false:
/// attached; true: a DETACH ... CONCURRENTLY began and was interrupted.
inline constexpr const char* kPartitionAttachment = R"SQL(
SELECT to_regclass($1::text) IS NOT NULL AS exists,
       (SELECT i.inhdetachpending FROM pg_inherits i
         WHERE i.inhrelid = to_regclass($1::text) AND i.inhparent = 'job_events'::regclass)
           AS detach_pending
)SQL";

/// Detaches without ACCESS EXCLUSIVE on job_events (claims and every other insert go on); runs
/// outside a transaction block. FINALIZE completes one that was interrupted.
inline constexpr const char* kDetachPartition =
    "ALTER TABLE job_events DETACH PARTITION {PARTITION} CONCURRENTLY";
inline constexpr const char* kFinalizeDetach =
    "ALTER TABLE job_events DETACH PARTITION {PARTITION} FINALIZE";
inline constexpr const char* kDropPartition = "DROP TABLE IF EXISTS {PARTITION}";
/// The rows a detached partition holds, checked against its archive before it is dropped.
inline constexpr const char* kCountPartition = "SELECT count(*) FROM {PARTITION}";

/// $1 after id, $2 limit. One page of a detached partition's events, in id order (its primary
/// key (id, at) serves it).
inline constexpr const char* kPartitionPage = R"SQL(
SELECT id, job_id, org_id, generation, kind, coalesce(worker, '') AS worker,
       aclaim_us(at) AS at_us, detail
  FROM {PARTITION} WHERE id > $1::bigint ORDER BY id LIMIT $2::int
)SQL";

/// $1 name. The registry's steps: detaching, then archived (with the file), then dropped.
inline const Statement kMarkDetaching{
    "aclaim_mark_detaching",
    "UPDATE job_event_partitions SET state = 'detaching' WHERE name = $1::text AND state = "
    "'attached'",
    {"name text"}};
/// $1 name, $2 now, $3 file, $4 rows, $5 min id, $6 max id, $7 sha256.
inline const Statement kMarkArchived{"aclaim_mark_archived",
                                     R"SQL(
UPDATE job_event_partitions
   SET state = 'archived', archived_at = aclaim_ts($2::bigint), archive_file = $3::text,
       rows = $4::bigint, min_id = $5::bigint, max_id = $6::bigint, sha256 = $7::text
 WHERE name = $1::text AND state IN ('attached', 'detaching')
)SQL",
                                     {"name text", "now_us bigint", "file text", "rows bigint",
                                      "min_id bigint", "max_id bigint", "sha256 text"}};
inline const Statement kMarkDropped{
    "aclaim_mark_dropped",
    "UPDATE job_event_partitions SET state = 'dropped' WHERE name = $1::text AND state = "
    "'archived'",
    {"name text"}};

/// $1 job. The prune ledger's record of one job: when retention removed it, in which
/// organization and in what state (counted in that batch's row).
inline const Statement kPrunedJob{"aclaim_pruned_job",
                                  R"SQL(
SELECT org_id, aclaim_us(pruned_at) AS pruned_us FROM job_prunes
 WHERE jobs @> $1::bigint
)SQL",
                                  {"job bigint"}};

/// $1 now, $2 batch. Removes at most $2 counts of refused park callbacks whose hour ended their
/// keep (30 days, schema/baseline/tables.sql) before now; answers how many.
inline const Statement kPruneParkRefusals{
    "aclaim_prune_park_refusals",
    "SELECT aclaim_prune_park_refusals($1::bigint, $2::int) AS removed",
    {"now_us bigint", "batch int"}};

/// The statements above that are Statement objects, for the test that holds each text to its
/// parameter contract.
inline const std::vector<const Statement*> kRetentionStatements = {
    &kRetentionPreview, &kRetentionLedger,  &kEventPartitions, &kRetentionTableSizes,
    &kPartitionsDue,    &kMarkDetaching,    &kMarkArchived,    &kMarkDropped,
    &kPrunedJob,        &kPruneParkRefusals};

}  // namespace aclaim::ops::sql
