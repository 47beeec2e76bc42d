#pragma once

// The statements of a coordinator's presence (coordinator_presence, schema/baseline/tables.sql: its
// reviewers' names and the queues each serves). Time comes in as microseconds, as everywhere in
// the store.

#include "common/store/statement.hpp"

namespace aclaim::coordinator::sql {

using store::sql::Statement;

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

}  // namespace aclaim::coordinator::sql
