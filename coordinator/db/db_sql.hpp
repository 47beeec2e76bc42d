#pragma once

// The coordinator's own statements, beside the store's (common/store/*_sql.hpp): the listener's
// check of its server, the presence of a coordinator's reviewers (coordinator_presence,
// schema/baseline/tables.sql: their names and the queues each serves) and the aging pass. Time
// comes in as microseconds, as everywhere in the store.

#include "common/store/statement.hpp"

namespace aclaim::coordinator::sql {

using store::sql::Statement;

/// True while the listener's server is a writable primary: a standby's or a fenced primary's
/// session hears no notification the new primary sends.
inline constexpr const char* kListenerWritable =
    "SELECT NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off'";

/// $1 coordinator, $2 endpoint, $3 started, $4 now, $5 bigint[] organizations, $6 int[] workers
/// (pairwise), $7 the publishing interval in ms, $8 text[] the workers' names (pairwise, each a
/// text[] literal, NULL past the publisher's cap), $9 text[] the queues each serves (pairwise,
/// each a JSON object from name to array of queues, NULL where $8 is). One row per organization
/// with workers connected; the coordinator's rows of organizations it no longer serves are
/// removed in the same statement.
inline const Statement kPublishPresence{
    "aclaim_publish_presence",
    R"SQL(
WITH published AS (
    INSERT INTO coordinator_presence AS p (org_id, coordinator, endpoint, workers, interval_ms,
                                           started_at, seen_at, reviewers, serving)
    SELECT o, $1::text, $2::text, w, $7::int, aclaim_ts($3::bigint), aclaim_ts($4::bigint),
           r::text[], s::jsonb
      FROM unnest($5::bigint[], $6::int[], $8::text[], $9::text[]) AS t(o, w, r, s)
    ON CONFLICT (org_id, coordinator) DO UPDATE
       SET endpoint = EXCLUDED.endpoint, workers = EXCLUDED.workers,
           reviewers = EXCLUDED.reviewers, serving = EXCLUDED.serving,
           interval_ms = EXCLUDED.interval_ms, started_at = EXCLUDED.started_at,
           seen_at = EXCLUDED.seen_at
    RETURNING p.org_id
)
DELETE FROM coordinator_presence p
 WHERE p.coordinator = $1::text AND p.org_id <> ALL($5::bigint[])
)SQL",
    {"coordinator text", "endpoint text", "started_us bigint", "now_us bigint", "orgs bigint[]",
     "workers int[]", "interval_ms int", "reviewers text[]", "serving text[]"}};

/// $1 now, $2 how old a row may be, in microseconds: rows of coordinators gone that long.
inline const Statement kForgetGonePresence{
    "aclaim_forget_gone_presence",
    "DELETE FROM coordinator_presence WHERE seen_at < aclaim_ts($1::bigint - $2::bigint)",
    {"now_us bigint", "age_us bigint"}};

/// $1 coordinator: its rows, at a clean stop.
inline const Statement kWithdrawPresence{
    "aclaim_withdraw_presence",
    "DELETE FROM coordinator_presence WHERE coordinator = $1::text",
    {"coordinator text"}};

/// The transaction lock that makes one coordinator the ager while the others pass: taken with a
/// try, never waited for, and apart from every lock a claim takes (kClaimLocks).
inline const Statement kAgingTryLock{
    "aclaim_aging_try_lock",
    "SELECT pg_try_advisory_xact_lock(hashtextextended('aclaim aging', 0)) AS held",
    {}};

/// $1 now, $2 batch. Raises the priority of the pending jobs of aged queues whose wait crossed a
/// step since the last pass (aclaim_age_jobs): how many, and whether a queue is still behind.
inline const Statement kAgeJobs{"aclaim_age_jobs",
                                "SELECT raised, more FROM aclaim_age_jobs($1::bigint, $2::int)",
                                {"now_us bigint", "batch int"}};

}  // namespace aclaim::coordinator::sql
