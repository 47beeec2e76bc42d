#pragma once

// The statements of schedules (schema/baseline/tables.sql): the operator's add, pause, resume,
// remove and list, and the scheduler's due read and tick. Time comes in and out as microseconds.

#include <vector>

#include "common/store/shared_sql.hpp"

namespace aclaim::ops::sql {

using store::sql::Statement;

/// The columns ScheduleStore reads a schedule from.
inline constexpr const char* kScheduleColumns =
    "s.id, s.org_id, s.name, s.cron, s.time_zone, s.queue, s.payload, s.priority, s.paused, "
    "s.missed, aclaim_us(s.last_tick_at) AS last_tick_us, aclaim_us(s.next_tick_at) AS "
    "next_tick_us";

/// $1 an IANA zone name: whether PostgreSQL knows it (an offset like UTC+3 is no zone).
inline const Statement kScheduleZoneKnown{
    "aclaim_schedule_zone_known",
    "SELECT EXISTS (SELECT FROM pg_timezone_names WHERE name = $1::text)",
    {"zone text"}};

/// $1 instant, $2 zone: the zone's UTC offset then, in microseconds (local = UTC + offset).
inline const Statement kScheduleZoneOffset{
    "aclaim_schedule_zone_offset",
    "SELECT aclaim_us((aclaim_ts($1::bigint) AT TIME ZONE $2::text) AT TIME ZONE 'UTC') - "
    "$1::bigint",
    {"at_us bigint", "zone text"}};

/// $1 org, $2 name, $3 cron, $4 zone, $5 queue, $6 payload, $7 priority, $8 paused, $9 missed,
/// $10 next tick, $11 now, $12 operator, $13 detail. Nothing when the name is taken.
inline const Statement kScheduleAdd{
    "aclaim_schedule_add",
    R"SQL(
WITH s AS (
    INSERT INTO schedules (org_id, name, cron, time_zone, queue, payload, priority, paused, missed,
                           next_tick_at, created_at, updated_at)
    VALUES ($1::bigint, $2::text, $3::text, $4::text, $5::text, $6::text, $7::int, $8::bool,
            $9::text, aclaim_ts($10::bigint), aclaim_ts($11::bigint), aclaim_ts($11::bigint))
    ON CONFLICT (org_id, name) DO NOTHING
    RETURNING id, org_id, name
), logged AS (
    INSERT INTO schedule_events (org_id, schedule_id, name, kind, actor, at, detail)
    SELECT org_id, id, name, 'added', $12::text, aclaim_ts($11::bigint), $13::text FROM s
)
SELECT id FROM s
)SQL",
    {"org bigint", "name text", "cron text", "zone text", "queue text", "payload text",
     "priority int", "paused bool", "missed text", "next_us bigint", "now_us bigint",
     "operator text", "detail text"}};

/// $1 org, $2 name: the schedule, locked against a scheduler's tick and another operator.
inline const Statement kScheduleLock{
    "aclaim_schedule_lock",
    std::string("SELECT ") + kScheduleColumns +
        " FROM schedules s WHERE s.org_id = $1::bigint AND s.name = $2::text FOR UPDATE",
    {"org bigint", "name text"}};

/// $1 id, $2 paused, $3 next tick (NULL: keep), $4 now, $5 operator, $6 reason.
inline const Statement kSchedulePause{"aclaim_schedule_pause",
                                      R"SQL(
WITH s AS (
    UPDATE schedules SET paused = $2::bool,
                         next_tick_at = coalesce(aclaim_ts($3::bigint), next_tick_at),
                         updated_at = aclaim_ts($4::bigint)
     WHERE id = $1::bigint
    RETURNING id, org_id, name
)
INSERT INTO schedule_events (org_id, schedule_id, name, kind, actor, at, detail)
SELECT org_id, id, name, CASE WHEN $2::bool THEN 'paused' ELSE 'resumed' END, $5::text,
       aclaim_ts($4::bigint), $6::text FROM s
)SQL",
                                      {"id bigint", "paused bool", "next_us bigint",
                                       "now_us bigint", "operator text", "reason text"}};

/// $1 id, $2 now, $3 operator, $4 reason. The schedule's ticks and events stay.
inline const Statement kScheduleRemove{
    "aclaim_schedule_remove",
    R"SQL(
WITH s AS (
    DELETE FROM schedules WHERE id = $1::bigint RETURNING id, org_id, name
)
INSERT INTO schedule_events (org_id, schedule_id, name, kind, actor, at, detail)
SELECT org_id, id, name, 'removed', $3::text, aclaim_ts($2::bigint), $4::text FROM s
)SQL",
    {"id bigint", "now_us bigint", "operator text", "reason text"}};

/// $1 organization, or NULL for every one.
inline const Statement kScheduleList{
    "aclaim_schedule_list",
    std::string("SELECT ") + kScheduleColumns +
        " FROM schedules s WHERE $1::bigint IS NULL OR s.org_id = $1::bigint "
        "ORDER BY s.org_id, s.name",
    {"org bigint"}};

/// $1 now, $2 limit: the schedules with a tick due, earliest first. The scheduler's one read per
/// interval, one statement outside a transaction: a probe of schedules_due, empty when no
/// schedule runs.
inline const Statement kScheduleDue{"aclaim_schedule_due",
                                    "SELECT id FROM aclaim_schedules_due($1::bigint, $2::int) id",
                                    {"now_us bigint", "max_rows int"}};

/// $1 id, $2 now: the schedule when a tick of it is still due, locked; nothing when another
/// scheduler holds it (it is ticking it now) or ticked it already.
inline const Statement kScheduleClaimDue{
    "aclaim_schedule_claim_due",
    std::string("SELECT ") + kScheduleColumns +
        " FROM schedules s WHERE s.id = $1::bigint AND NOT s.paused "
        "AND s.next_tick_at <= aclaim_ts($2::bigint) FOR UPDATE SKIP LOCKED",
    {"id bigint", "now_us bigint"}};

/// $1 org, $2 now, $3 queue, $4 payload, $5 priority, $6 dedupe key, $7 schedule, $8 tick. The
/// job goes through aclaim_enqueue_job as any producer's; the tick is recorded when it made a
/// job (a job already holding the key was enqueued before, and is not counted twice).
inline const Statement kScheduleEnqueueTick{
    "aclaim_schedule_enqueue_tick",
    R"SQL(
WITH e AS (
    SELECT e.id, e.created
      FROM aclaim_enqueue_job($1::bigint, $2::bigint, $3::text, $4::text, $5::int, NULL, NULL,
                              NULL, NULL, NULL, $6::text, NULL) e
), recorded AS (
    INSERT INTO schedule_ticks (org_id, schedule_id, tick_at, job_id, at)
    SELECT $1::bigint, $7::bigint, aclaim_ts($8::bigint), e.id, aclaim_ts($2::bigint)
      FROM e WHERE e.created
)
SELECT id, created FROM e
)SQL",
    {"org bigint", "now_us bigint", "queue text", "payload text", "priority int", "dedupe_key text",
     "schedule bigint", "tick_us bigint"}};

/// $1 id, $2 the next tick read, $3 the last tick enqueued (NULL: keep), $4 the next tick. The
/// fence: moves on only from the value this transaction read.
inline const Statement kScheduleAdvance{
    "aclaim_schedule_advance",
    "UPDATE schedules SET last_tick_at = coalesce(aclaim_ts($3::bigint), last_tick_at), "
    "next_tick_at = aclaim_ts($4::bigint) "
    "WHERE id = $1::bigint AND next_tick_at = aclaim_ts($2::bigint)",
    {"id bigint", "expected_us bigint", "last_us bigint", "next_us bigint"}};

/// $1 schedule, $2 the oldest tick kept: the schedule's tick records older than that, so that
/// schedule_ticks stays bounded (an every-minute schedule writes 43,200 a month).
inline const Statement kScheduleForgetTicks{
    "aclaim_schedule_forget_ticks",
    "DELETE FROM schedule_ticks WHERE schedule_id = $1::bigint AND tick_at < aclaim_ts($2::bigint)",
    {"schedule bigint", "oldest_us bigint"}};

/// Every tick enqueued, for the checker.
inline constexpr const char* kCheckScheduleTicks =
    "SELECT org_id, schedule_id, aclaim_us(tick_at) AS tick_us, job_id FROM schedule_ticks "
    "ORDER BY id";

inline const std::vector<const Statement*> kScheduleStatements = {
    &kScheduleZoneKnown, &kScheduleZoneOffset,  &kScheduleAdd,     &kScheduleLock,
    &kSchedulePause,     &kScheduleRemove,      &kScheduleList,    &kScheduleDue,
    &kScheduleClaimDue,  &kScheduleEnqueueTick, &kScheduleAdvance, &kScheduleForgetTicks};

}  // namespace aclaim::ops::sql
