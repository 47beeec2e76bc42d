-- Periodic jobs: a schedule enqueues a job of its organization at every tick of a cron expression
-- read in an IANA time zone. The coordinators' schedulers (coordinator/db/scheduler.cpp) enqueue
-- the ticks that came due through aclaim_enqueue_job (0005), so a scheduled job is a normal job.
--
-- Each tick is enqueued once however many coordinators run: the scheduler locks the schedule's
-- row (FOR UPDATE SKIP LOCKED), enqueues, and moves next_tick_at on with an UPDATE fenced on the
-- value it read, all in one transaction; the job's dedupe key names the schedule and the tick, a
-- second line of defence while the job lives. schedule_ticks records every tick enqueued and has
-- no unique key on purpose: `aclaimctl check` proves from it that no tick was enqueued twice.
-- Nothing here is read by a claim or a completion.

CREATE TABLE schedules (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id        bigint      NOT NULL CHECK (org_id > 0),
    name          text        NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$'),
    -- Five fields (minute hour day-of-month month day-of-week), checked by the tools that write
    -- it (common/ops/cron.cpp); kept as written, for people.
    cron          text        NOT NULL CHECK (length(cron) BETWEEN 9 AND 256),
    -- An IANA name (Europe/Berlin), checked against pg_timezone_names when the schedule is added.
    time_zone     text        NOT NULL,
    queue         text        NOT NULL CHECK (queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$'),
    -- The job's payload; {schedule}, {tick} (ISO 8601, UTC) and {tick_us} are filled per tick.
    payload       text        NOT NULL DEFAULT '',
    priority      integer     NOT NULL DEFAULT 0,
    paused        boolean     NOT NULL DEFAULT false,
    -- What a scheduler does with ticks missed while no coordinator ran: skip enqueues the latest
    -- of them only, catch_up every one of them (at most 100 a pass, oldest first).
    missed        text        NOT NULL DEFAULT 'skip' CHECK (missed IN ('skip', 'catch_up')),
    last_tick_at  timestamptz,
    next_tick_at  timestamptz NOT NULL,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    UNIQUE (org_id, name)
);
-- The scheduler's one read per interval: the earliest due tick of any running schedule. Empty
-- when no schedule exists, so a coordinator without schedules pays one probe of an empty index.
CREATE INDEX schedules_due ON schedules (next_tick_at) WHERE NOT paused;

-- Add, pause, resume and remove, with who and why: the schedules' audit log, as queue_events is
-- the queues'. A removed schedule's events stay.
CREATE TABLE schedule_events (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id      bigint      NOT NULL,
    schedule_id bigint      NOT NULL,
    name        text        NOT NULL,
    kind        text        NOT NULL CHECK (kind IN ('added', 'paused', 'resumed', 'removed')),
    actor       text        NOT NULL,
    at          timestamptz NOT NULL,
    detail      text        NOT NULL DEFAULT ''
);
CREATE INDEX schedule_events_schedule ON schedule_events (org_id, schedule_id, id);
CREATE TRIGGER schedule_events_no_update BEFORE UPDATE OR DELETE ON schedule_events
    FOR EACH ROW EXECUTE FUNCTION job_events_append_only();

-- One row per tick a scheduler enqueued, in the transaction that enqueued its job; a scheduler
-- forgets a schedule's rows older than 31 days as it ticks it, so the table stays bounded.
CREATE TABLE schedule_ticks (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id      bigint      NOT NULL,
    schedule_id bigint      NOT NULL,
    tick_at     timestamptz NOT NULL,
    job_id      bigint      NOT NULL,
    at          timestamptz NOT NULL
);
CREATE INDEX schedule_ticks_tick ON schedule_ticks (schedule_id, tick_at);

-- The schedules with a tick due at now_us, earliest first: the scheduler's read every interval,
-- one statement outside any transaction. SECURITY DEFINER: it sees every organization's
-- schedules without the scope a transaction would have to set first, and discloses only ids
-- (ticking one then locks its row in a transaction scoped as usual).
CREATE FUNCTION aclaim_schedules_due(now_us bigint, max_rows integer) RETURNS SETOF bigint
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
    SELECT id FROM schedules WHERE NOT paused AND next_tick_at <= aclaim_ts(now_us)
     ORDER BY next_tick_at LIMIT max_rows
$$;

ALTER TABLE schedules ENABLE ROW LEVEL SECURITY;
ALTER TABLE schedule_events ENABLE ROW LEVEL SECURITY;
ALTER TABLE schedule_ticks ENABLE ROW LEVEL SECURITY;
CREATE POLICY org_scope ON schedules TO aclaim_coordinator
    USING (aclaim_org_visible(org_id)) WITH CHECK (aclaim_org_visible(org_id));
CREATE POLICY org_scope ON schedule_events TO aclaim_coordinator
    USING (aclaim_org_visible(org_id)) WITH CHECK (aclaim_org_visible(org_id));
CREATE POLICY org_scope ON schedule_ticks TO aclaim_coordinator
    USING (aclaim_org_visible(org_id)) WITH CHECK (aclaim_org_visible(org_id));
-- The scheduler reads and advances schedules and records ticks; adding, pausing and removing
-- them is the operator's (aclaimctl, as the login).
GRANT SELECT, UPDATE ON schedules TO aclaim_coordinator;
GRANT SELECT, INSERT, DELETE ON schedule_ticks TO aclaim_coordinator;
GRANT SELECT ON schedule_events TO aclaim_coordinator;
