-- The job lifecycle: queues (reviewer skills), scheduled jobs, retries with backoff and the
-- discarded state, run deadlines, cancellation, idempotent enqueue, per-queue limits and pause.
-- Applied in place on a populated database: every existing job lands in queue 'default' with
-- run_at = enqueued_at, so its claim order does not change.

-- ---- jobs: new columns ----
ALTER TABLE jobs
    ADD COLUMN queue text NOT NULL DEFAULT 'default'
        CONSTRAINT queue_name CHECK (queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$'),
    ADD COLUMN run_at timestamptz,
    -- Retry policy, fixed at enqueue from the job's own values or its queue's (job_queues). The
    -- built-in default is no backoff, today's behaviour: a retry is claimable at once.
    ADD COLUMN backoff_base_us bigint NOT NULL DEFAULT 0 CHECK (backoff_base_us >= 0),
    ADD COLUMN backoff_cap_us bigint NOT NULL DEFAULT 300000000,
    -- A run deadline apart from the lease: how long one attempt may run, and when this one ends.
    ADD COLUMN run_timeout_us bigint CHECK (run_timeout_us > 0),
    ADD COLUMN deadline_at timestamptz,
    -- Idempotent enqueue: unique per organization while the row holds it (jobs_dedupe).
    ADD COLUMN dedupe_key text CHECK (length(dedupe_key) BETWEEN 1 AND 256),
    ADD CONSTRAINT backoff_cap_covers_base CHECK (backoff_cap_us >= backoff_base_us);

UPDATE jobs SET run_at = enqueued_at;
ALTER TABLE jobs ALTER COLUMN run_at SET NOT NULL;
-- A row inserted without run_at (by hand, or by a tool written before it existed) is runnable
-- from its enqueue, as every job was before. aclaim_enqueue_job always sets it, so the trigger's
-- function never runs on the enqueue path: the WHEN clause is checked without calling it.
CREATE FUNCTION jobs_default_run_at() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.run_at := NEW.enqueued_at;
    RETURN NEW;
END $$;
CREATE TRIGGER jobs_default_run_at BEFORE INSERT ON jobs
    FOR EACH ROW WHEN (NEW.run_at IS NULL) EXECUTE FUNCTION jobs_default_run_at();

-- ---- jobs: states ----
-- scheduled: pending but not claimable before run_at (delayed at enqueue, or waiting out a retry's
--            backoff); the coordinators' promoter makes it pending when run_at arrives.
-- discarded: terminal; every attempt was used up. A person revives it with `aclaimctl retry`.
-- cancelled: terminal; an operator or producer cancelled it (pending, scheduled or assigned).
ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check CHECK (state IN (
    'pending', 'scheduled', 'assigned', 'completed', 'failed', 'discarded', 'cancelled',
    'quarantined'));

ALTER TABLE jobs DROP CONSTRAINT pending_has_no_owner;
ALTER TABLE jobs ADD CONSTRAINT waiting_has_no_owner CHECK (state NOT IN ('pending', 'scheduled') OR (
    assignee IS NULL AND claimed_at IS NULL AND lease_expires_at IS NULL
    AND completed_at IS NULL AND result_ref IS NULL));
-- A lease never outlives the attempt's deadline.
ALTER TABLE jobs ADD CONSTRAINT lease_within_deadline CHECK (state <> 'assigned' OR
    deadline_at IS NULL OR (deadline_at > claimed_at AND lease_expires_at <= deadline_at));
ALTER TABLE jobs ADD CONSTRAINT ended_has_no_lease_nor_result CHECK (
    state NOT IN ('discarded', 'cancelled') OR (
    completed_at IS NOT NULL AND lease_expires_at IS NULL AND result_ref IS NULL));

-- ---- jobs: indexes ----
-- Claim order is priority, then run_at, then id, on pending rows only. Scheduled rows are in an
-- index of their own, so a million future jobs are never on a claim's path.
DROP INDEX jobs_claim_order;
CREATE INDEX jobs_claim_order ON jobs (org_id, priority DESC, run_at, id) WHERE state = 'pending';
CREATE INDEX jobs_scheduled ON jobs (run_at, id) WHERE state = 'scheduled';
-- Per-queue concurrency limits count the leases out of a queue.
CREATE INDEX jobs_assigned_queue ON jobs (org_id, queue) WHERE state = 'assigned';
CREATE UNIQUE INDEX jobs_dedupe ON jobs (org_id, dedupe_key) WHERE dedupe_key IS NOT NULL;

-- ---- the audit log's new kinds ----
-- due: a scheduled job's run_at arrived. discarded: the last attempt failed or expired.
-- cancelled: who and why in detail. retried: an operator gave a finished job a fresh budget.
ALTER TABLE job_events DROP CONSTRAINT job_events_kind_check;
ALTER TABLE job_events ADD CONSTRAINT job_events_kind_check CHECK (kind IN (
    'enqueued', 'claimed', 'renewed', 'completed', 'failed', 'released', 'reclaimed', 'rejected',
    'quarantined', 'unquarantined', 'due', 'discarded', 'cancelled', 'retried'));

-- ---- queues ----
-- Per organization and queue: the defaults a job takes at enqueue (NULL: the built-in default),
-- the concurrency limit and the pause switch. A queue needs no row to be used.
CREATE TABLE job_queues (
    org_id          bigint  NOT NULL CHECK (org_id > 0),
    queue           text    NOT NULL CHECK (queue ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$'),
    paused          boolean NOT NULL DEFAULT false,
    max_assigned    integer CHECK (max_assigned > 0),
    max_attempts    integer CHECK (max_attempts > 0),
    backoff_base_us bigint  CHECK (backoff_base_us >= 0),
    backoff_cap_us  bigint  CHECK (backoff_cap_us >= 0),
    run_timeout_us  bigint  CHECK (run_timeout_us > 0),
    updated_at      timestamptz NOT NULL,
    PRIMARY KEY (org_id, queue)
);

-- Pause, resume and settings changes, with who and why: the queue's audit log.
CREATE TABLE queue_events (
    id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id bigint      NOT NULL,
    queue  text        NOT NULL,
    kind   text        NOT NULL CHECK (kind IN ('paused', 'resumed', 'configured')),
    actor  text        NOT NULL,
    at     timestamptz NOT NULL,
    detail text        NOT NULL DEFAULT ''
);
CREATE INDEX queue_events_queue ON queue_events (org_id, queue, id);
CREATE TRIGGER queue_events_no_update BEFORE UPDATE OR DELETE ON queue_events
    FOR EACH ROW EXECUTE FUNCTION job_events_append_only();

ALTER TABLE job_queues ENABLE ROW LEVEL SECURITY;
ALTER TABLE queue_events ENABLE ROW LEVEL SECURITY;
CREATE POLICY org_scope ON job_queues TO aclaim_coordinator
    USING (aclaim_org_visible(org_id)) WITH CHECK (aclaim_org_visible(org_id));
CREATE POLICY org_scope ON queue_events TO aclaim_coordinator
    USING (aclaim_org_visible(org_id)) WITH CHECK (aclaim_org_visible(org_id));
GRANT SELECT ON job_queues, queue_events TO aclaim_coordinator;

-- ---- functions ----

-- The wait before retry number `attempt` (1 = the first retry): base * 2^(attempt-1), capped,
-- with "equal jitter" (half fixed, half spread) so that jobs failed together do not come back
-- together. The spread is a hash of the job and the attempt, not random(): the same attempt of
-- the same job always gets the same delay, so a statement may compute it twice and a test can
-- predict it.
CREATE FUNCTION aclaim_retry_delay(job bigint, attempt integer, base_us bigint, cap_us bigint)
    RETURNS bigint LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN (WITH e AS (SELECT least(cap_us::float8,
                                    base_us * power(2::float8, least(greatest(attempt, 1), 62) - 1))
                                  AS full_us)
            SELECT (full_us / 2 + full_us / 2 *
                    ((hashint8extended(job, attempt) & 1023)::float8 / 1024))::bigint FROM e);

-- Wakes the coordinators whose claims are parked on this organization's queue (delivered at
-- commit; notifications with the same payload in one transaction are delivered once).
CREATE FUNCTION aclaim_wake(org bigint, queue_name text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('aclaim_jobs', org::text || ':' || queue_name);
    RETURN true;
END $$;

-- Tells the coordinators' promoters that a job was scheduled for run_at, so that one whose
-- timer is set later re-reads the earliest run_at.
CREATE FUNCTION aclaim_scheduled(run_at_us bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('aclaim_schedule', run_at_us::text);
    RETURN true;
END $$;

-- Enqueues one job, or returns the job that holds its dedupe_key. Race-free under concurrent
-- producers: the unique index jobs_dedupe decides, and INSERT .. ON CONFLICT waits for an
-- uncommitted holder of the key and then sees it. A key held by a finished job is released
-- (set to NULL on that row) once dedupe_window_us has passed since it finished, and the insert
-- is tried again. NULL arguments take the queue's setting, then the built-in default.
-- Runs as the caller: row-level security applies.
CREATE FUNCTION aclaim_enqueue_job(
    org bigint, now_us bigint, queue_name text, payload text, priority integer,
    run_at_us bigint, max_attempts integer, backoff_base_us bigint, backoff_cap_us bigint,
    run_timeout_us bigint, dedupe_key text, dedupe_window_us bigint,
    OUT id bigint, OUT created boolean, OUT state text)
    LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    q job_queues%ROWTYPE;
    at_us bigint := greatest(coalesce(run_at_us, now_us), now_us);
    held record;
    base_us bigint;
    cap_us bigint;
BEGIN
    queue_name := coalesce(queue_name, 'default');
    SELECT * INTO q FROM job_queues jq WHERE jq.org_id = org AND jq.queue = queue_name;
    base_us := coalesce(backoff_base_us, q.backoff_base_us, 0);
    cap_us := greatest(coalesce(backoff_cap_us, q.backoff_cap_us, 300000000), base_us);
    state := CASE WHEN at_us > now_us THEN 'scheduled' ELSE 'pending' END;
    LOOP
        INSERT INTO jobs AS j (org_id, queue, state, priority, enqueued_at, run_at, payload,
                               max_attempts, backoff_base_us, backoff_cap_us, run_timeout_us,
                               dedupe_key)
        VALUES (org, queue_name, state, coalesce(priority, 0), aclaim_ts(now_us),
                aclaim_ts(at_us), coalesce(payload, ''),
                coalesce(max_attempts, q.max_attempts, 3), base_us, cap_us,
                coalesce(run_timeout_us, q.run_timeout_us), dedupe_key)
        ON CONFLICT (org_id, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING
        RETURNING j.id INTO id;
        IF id IS NOT NULL THEN
            created := true;
            INSERT INTO job_events (job_id, org_id, generation, kind, at, detail)
            VALUES (id, org, 0, 'enqueued', aclaim_ts(now_us),
                    'queue ' || queue_name || CASE WHEN state = 'scheduled'
                        THEN '; run at ' || aclaim_ts(at_us)::text ELSE '' END);
            IF state = 'scheduled' THEN
                PERFORM aclaim_scheduled(at_us);
            ELSE
                PERFORM aclaim_wake(org, queue_name);
            END IF;
            RETURN;
        END IF;
        SELECT j.id, j.state, j.completed_at INTO held
          FROM jobs j WHERE j.org_id = org AND j.dedupe_key = aclaim_enqueue_job.dedupe_key
           FOR UPDATE;
        CONTINUE WHEN NOT FOUND;  -- its holder released it meanwhile: insert again
        IF held.state NOT IN ('completed', 'failed', 'discarded', 'cancelled')
           OR held.completed_at > aclaim_ts(now_us - coalesce(dedupe_window_us, 0)) THEN
            id := held.id;
            created := false;
            state := held.state;
            RETURN;
        END IF;
        UPDATE jobs j SET dedupe_key = NULL WHERE j.id = held.id;
    END LOOP;
END $$;

-- Advisory lock keys: an organization's queue settings (taken shared by every claim, exclusive
-- by pause, resume and limit changes) and one limited queue (exclusive, by the claims on it).
CREATE FUNCTION aclaim_org_lock(org bigint) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN hashtextextended('aclaim queues of ' || org::text, 0);
CREATE FUNCTION aclaim_queue_lock(org bigint, queue_name text) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN hashtextextended('aclaim queue ' || org::text || ':' || queue_name, 0);

-- A registered worker key may be limited to some queues (NULL: any queue of its organization).
ALTER TABLE worker_keys ADD COLUMN queues text[]
    CHECK (queues IS NULL OR cardinality(queues) BETWEEN 1 AND 32);

-- /metrics counts discarded jobs per queue: they wait for a person, so they are few, but they sit
-- among every finished row, which no scrape may read.
CREATE INDEX jobs_discarded ON jobs (org_id, queue) WHERE state = 'discarded';
