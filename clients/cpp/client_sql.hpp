#pragma once

// The statements of the client library: calls of the producer and consumer API of
// schema/baseline/tables.sql. They run unprepared on the caller's connection (a prepared name
// could collide with the service's own); time arrives as microseconds from the caller's clock.
// $n org is NULL for a producer login (the database takes the organization from the login) or
// names it for a trusted login.

#include "common/store/statement.hpp"

namespace aclaim::clients::sql {

using store::sql::Statement;

/// One array element per job (new_job_arrays), the dedupe window, the organization and now, then
/// one element per dependency edge (NULL when no job has any; schema/baseline/tables.sql), then one
/// element per exclusion (NULL when no job has any; schema/baseline/tables.sql).
inline const Statement kEnqueue{
    "aclaim_client_enqueue",
    R"SQL(
SELECT n, id, created, state
  FROM aclaim_enqueue_many(payloads => $1::text[], queues => $2::text[], priorities => $3::int[],
                           run_at_us => $4::bigint[], dedupe_keys => $5::text[],
                           max_attempts => $6::int[], run_timeout_us => $7::bigint[],
                           backoff_base_us => $8::bigint[], backoff_cap_us => $9::bigint[],
                           dedupe_window_us => $10::bigint, org => $11::bigint,
                           now_us => $12::bigint, depends_n => $13::int[],
                           depends_on => $14::bigint[], on_failure => $15::text[],
                           exclude_n => $16::int[], exclude_keys => $17::text[],
                           exclude_jobs => $18::bigint[])
 ORDER BY n
)SQL",
    {"payloads text[]", "queues text[]", "priorities int[]", "run_at_us bigint[]",
     "dedupe_keys text[]", "max_attempts int[]", "run_timeout_us bigint[]",
     "backoff_base_us bigint[]", "backoff_cap_us bigint[]", "dedupe_window_us bigint", "org bigint",
     "now_us bigint", "depends_n int[]", "depends_on bigint[]", "on_failure text[]",
     "exclude_n int[]", "exclude_keys text[]", "exclude_jobs bigint[]"}};

inline const Statement kCancel{
    "aclaim_client_cancel",
    "SELECT id, was FROM aclaim_cancel($1::bigint[], $2::text, $3::bigint, $4::bigint)",
    {"jobs bigint[]", "reason text", "org bigint", "now_us bigint"}};

inline const Statement kStatus{
    "aclaim_client_status",
    "SELECT * FROM aclaim_job_status($1::bigint[], $2::text[], $3::bigint)",
    {"jobs bigint[]", "dedupe_keys text[]", "org bigint"}};

inline const Statement kGroupCreate{
    "aclaim_client_group_create",
    "SELECT org_id, acked, created FROM aclaim_results_group_create($1::text, $2::text, "
    "$3::bigint, $4::bigint)",
    {"group text", "start_at text", "org bigint", "now_us bigint"}};

inline const Statement kGroupDrop{"aclaim_client_group_drop",
                                  "SELECT aclaim_results_group_drop($1::text, $2::bigint)",
                                  {"group text", "org bigint"}};

/// $1 org (NULL: the login's, or for a trusted login every organization).
inline const Statement kGroups{
    "aclaim_client_groups", "SELECT * FROM aclaim_results_groups($1::bigint)", {"org bigint"}};

inline const Statement kFetch{"aclaim_client_fetch",
                              "SELECT * FROM aclaim_results_fetch($1::text, $2::int, $3::bigint)",
                              {"group text", "max_rows int", "org bigint"}};

inline const Statement kAck{
    "aclaim_client_ack",
    "SELECT aclaim_results_ack($1::text, $2::bigint, $3::bigint, $4::bigint)",
    {"group text", "up_to bigint", "org bigint", "now_us bigint"}};

inline const std::vector<const Statement*> kStatements = {
    &kEnqueue, &kCancel, &kStatus, &kGroupCreate, &kGroupDrop, &kGroups, &kFetch, &kAck};

}  // namespace aclaim::clients::sql
