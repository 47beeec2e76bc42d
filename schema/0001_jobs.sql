-- The assignment store: jobs, their audit log and the published results.
-- Time is always passed in by the caller (microseconds since the Unix epoch) so that tests can
-- drive a manual clock; these two helpers convert without the rounding of to_timestamp(float).
CREATE FUNCTION aclaim_ts(us bigint) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN 'epoch'::timestamptz + us * interval '1 microsecond';

CREATE FUNCTION aclaim_us(ts timestamptz) RETURNS bigint
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN (extract(epoch FROM ts) * 1000000)::bigint;

CREATE TABLE jobs (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id           bigint      NOT NULL CHECK (org_id > 0),
    state            text        NOT NULL DEFAULT 'pending'
                     CHECK (state IN ('pending', 'assigned', 'completed', 'failed', 'quarantined')),
    priority         integer     NOT NULL DEFAULT 0,
    enqueued_at      timestamptz NOT NULL,
    payload          text        NOT NULL DEFAULT '',
    -- The fencing token: bumped by every claim, never decreased.
    generation       bigint      NOT NULL DEFAULT 0 CHECK (generation >= 0),
    assignee         text,
    claimed_at       timestamptz,
    lease_expires_at timestamptz,
    attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts     integer     NOT NULL DEFAULT 3 CHECK (max_attempts > 0),
    completed_at     timestamptz,
    result_ref       text,
    last_error       text,
    -- Set only by the recovery tool; the row's other fields are left exactly as they were.
    quarantined_from text,
    quarantine_reason text,

    CONSTRAINT pending_has_no_owner CHECK (state <> 'pending' OR (
        assignee IS NULL AND claimed_at IS NULL AND lease_expires_at IS NULL
        AND completed_at IS NULL AND result_ref IS NULL)),
    CONSTRAINT assigned_has_owner_and_lease CHECK (state <> 'assigned' OR (
        assignee IS NOT NULL AND claimed_at IS NOT NULL AND lease_expires_at IS NOT NULL
        AND lease_expires_at > claimed_at AND generation > 0 AND attempts > 0
        AND completed_at IS NULL AND result_ref IS NULL)),
    CONSTRAINT completed_has_result_and_no_lease CHECK (state <> 'completed' OR (
        result_ref IS NOT NULL AND completed_at IS NOT NULL AND lease_expires_at IS NULL
        AND assignee IS NOT NULL AND generation > 0)),
    CONSTRAINT failed_is_final_and_has_no_lease CHECK (state <> 'failed' OR (
        completed_at IS NOT NULL AND lease_expires_at IS NULL AND result_ref IS NULL)),
    CONSTRAINT quarantined_has_reason CHECK ((state = 'quarantined') =
        (quarantine_reason IS NOT NULL AND quarantined_from IS NOT NULL))
) WITH (fillfactor = 70);

-- Claim order on pending rows only: it stays small while the table grows with finished jobs.
-- Lease columns are deliberately not indexed so that renewals can be HOT updates.
CREATE INDEX jobs_claim_order ON jobs (org_id, priority DESC, enqueued_at, id)
    WHERE state = 'pending';
-- The reaper scans assigned rows only.
CREATE INDEX jobs_assigned ON jobs (id) WHERE state = 'assigned';

ALTER TABLE jobs SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02,
                      autovacuum_vacuum_cost_limit = 2000);

CREATE TABLE job_events (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job_id     bigint      NOT NULL,
    org_id     bigint      NOT NULL,
    generation bigint      NOT NULL,
    kind       text        NOT NULL CHECK (kind IN ('enqueued', 'claimed', 'renewed', 'completed',
                                'failed', 'released', 'reclaimed', 'rejected', 'quarantined',
                                'unquarantined')),
    worker     text,
    at         timestamptz NOT NULL,
    detail     text        NOT NULL DEFAULT ''
);
CREATE INDEX job_events_job ON job_events (job_id, id);

-- The log is append-only: history that can be rewritten proves nothing.
CREATE FUNCTION job_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'job_events is append-only';
END $$;
CREATE TRIGGER job_events_no_update BEFORE UPDATE OR DELETE ON job_events
    FOR EACH ROW EXECUTE FUNCTION job_events_append_only();

-- The transactional outbox: written in the same transaction as the completion.
CREATE TABLE job_results (
    job_id       bigint      PRIMARY KEY,
    org_id       bigint      NOT NULL,
    generation   bigint      NOT NULL,
    result_ref   text        NOT NULL,
    published_at timestamptz NOT NULL
);

-- Wakes coordinators whose claims are parked waiting for work in an organization. The
-- notification is delivered only when the surrounding transaction commits.
CREATE FUNCTION aclaim_wake(org bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('aclaim_jobs', org::text);
    RETURN true;
END $$;
