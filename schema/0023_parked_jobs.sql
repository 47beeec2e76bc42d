-- Jobs finished outside the fleet (protocol 1.6, PARK): the holder of a job hands it to an outside
-- system and gets back a callback token; the job waits, 'parked', until the outside system
-- finishes it with that token (aclaim_finish_parked, over SQL or the coordinator's
-- POST /v1/callback) or until the park's deadline, when the reaper treats it as an attempt that
-- failed and the queue's retry policy applies.
--
-- The token is bound to one job and one generation. It is stored only as its SHA-256 (a
-- database that held the table would otherwise hold working credentials); SHA-256 rather than
-- BLAKE2b because the SQL API hashes the presented token inside PostgreSQL, which has sha256()
-- built in and BLAKE2b only through an extension. 32 random bytes leave nothing to guess, so no
-- salt or slow hash is needed. A token is accepted once, only while its job is parked at its
-- generation and before the park's deadline; a replayed, stale or forged one is refused with its
-- reason and audited: in job_events ('rejected') when it names a job, in park_refusals when it
-- names none.

-- ---- jobs: the new state ----
-- parked: the holder of generation g handed the job to an outside system. It keeps its holder
-- (assignee) and generation, has no lease, and its deadline_at is the park's deadline (the run
-- deadline of the attempt is replaced: the outside system's time is the attempt). Not terminal;
-- cancellable. The state is added to whatever list the constraint holds now, so that a migration
-- before this one that added states keeps them.
DO $$
DECLARE
    def text;
BEGIN
    SELECT pg_get_constraintdef(c.oid) INTO def
      FROM pg_constraint c
     WHERE c.conrelid = 'jobs'::regclass AND c.conname = 'jobs_state_check';
    IF position('ARRAY[' IN def) = 0 THEN
        RAISE EXCEPTION 'jobs_state_check has an unexpected form: %', def;
    END IF;
    IF position('''parked''' IN def) = 0 THEN
        def := replace(def, 'ARRAY[', 'ARRAY[''parked''::text, ');
        EXECUTE 'ALTER TABLE jobs DROP CONSTRAINT jobs_state_check, '
                'ADD CONSTRAINT jobs_state_check ' || def;
    END IF;
END $$;

ALTER TABLE jobs ADD CONSTRAINT parked_has_holder_and_deadline CHECK (state <> 'parked' OR (
    assignee IS NOT NULL AND claimed_at IS NOT NULL AND deadline_at IS NOT NULL
    AND lease_expires_at IS NULL AND completed_at IS NULL AND result_ref IS NULL
    AND generation > 0));

-- The reaper's look for parks past their deadline: parked rows only, so the index costs the
-- other jobs nothing.
CREATE INDEX jobs_parked_deadline ON jobs (deadline_at, id) WHERE state = 'parked';

-- ---- the audit log's new kind ----
-- parked: the holder handed the job over (detail: the deadline and note). The outside system's
-- outcome is logged with the kinds a holder's would be (completed, failed, released, discarded),
-- worker 'callback'; a refused token 'rejected'.
DO $$
DECLARE
    def text;
BEGIN
    SELECT pg_get_constraintdef(c.oid) INTO def
      FROM pg_constraint c
     WHERE c.conrelid = 'job_events'::regclass AND c.conname = 'job_events_kind_check';
    IF position('ARRAY[' IN def) = 0 THEN
        RAISE EXCEPTION 'job_events_kind_check has an unexpected form: %', def;
    END IF;
    def := replace(regexp_replace(def, '\s*NOT VALID\s*$', ''), 'ARRAY[',
                   'ARRAY[''parked''::text, ');
    EXECUTE 'ALTER TABLE job_events DROP CONSTRAINT job_events_kind_check, '
            'ADD CONSTRAINT job_events_kind_check ' || def || ' NOT VALID';
END $$;

-- ---- the parks ----
-- One row per park (a job parked again after a retry has one row per generation), kept after it
-- is used so that a replayed token is told "already used" and a stale one "the job moved on",
-- not "unknown". Written by the coordinator's PARK (sql::kPark) and by aclaim_finish_parked;
-- removed with its job.
CREATE TABLE job_parks (
    token_hash  bytea       PRIMARY KEY CHECK (octet_length(token_hash) = 32),
    job_id      bigint      NOT NULL,
    org_id      bigint      NOT NULL CHECK (org_id > 0),
    generation  bigint      NOT NULL CHECK (generation > 0),
    parked_by   text        NOT NULL,
    parked_at   timestamptz NOT NULL,
    deadline_at timestamptz NOT NULL,
    note        text        NOT NULL DEFAULT '' CHECK (octet_length(note) <= 200),
    -- Set once, by the accepted callback: the token's use.
    used_at     timestamptz,
    used_by     text,
    outcome     text CHECK (outcome IN ('completed', 'failed', 'retry')),
    CONSTRAINT used_has_outcome CHECK ((used_at IS NULL) = (outcome IS NULL)),
    CONSTRAINT one_park_per_generation UNIQUE (job_id, generation)
);

ALTER TABLE job_parks ENABLE ROW LEVEL SECURITY;
CREATE POLICY org_scope ON job_parks TO aclaim_coordinator
    USING (aclaim_org_visible(org_id)) WITH CHECK (aclaim_org_visible(org_id));
GRANT SELECT, INSERT, UPDATE ON job_parks TO aclaim_coordinator;

CREATE FUNCTION jobs_forget_parks() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM job_parks p WHERE p.job_id IN (SELECT g.id FROM gone g);
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_forget_parks AFTER DELETE ON jobs REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_forget_parks();

-- Tokens that name no park (forged, mistyped, or of a job since removed): they have no job to be
-- audited under in job_events, so they are logged here, append-only (below), with who presented
-- them and the first bytes of their hash (enough to tell one repeated forgery from many, nothing
-- to finish a job with). A table rather than only a log line: it is evidence in the database
-- beside job_events, readable by SQL, and survives the coordinator's log rotation; the HTTP
-- endpoint also counts refusals (aclaim_park_callbacks_refused_total). Each forged call writes
-- one narrow row, so a flood is bounded by the callers' rate; truncate it when no longer needed.
CREATE TABLE park_refusals (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at         timestamptz NOT NULL,
    caller     text        NOT NULL,
    reason     text        NOT NULL,
    hash_head  text        NOT NULL DEFAULT ''
);
-- Append-only as job_events is (0001): a row is never changed or deleted one by one; an operator
-- who no longer needs the evidence truncates the table.
CREATE FUNCTION park_refusals_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'park_refusals is append-only';
END $$;
CREATE TRIGGER park_refusals_no_update BEFORE UPDATE OR DELETE ON park_refusals
    FOR EACH ROW EXECUTE FUNCTION park_refusals_append_only();
ALTER TABLE park_refusals ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON park_refusals TO aclaim_coordinator;
CREATE POLICY coordinator_reads ON park_refusals FOR SELECT TO aclaim_coordinator USING (true);

-- The stored form of a token as the wire carries it (64 hex digits); NULL for anything else.
CREATE FUNCTION aclaim_park_token_hash(token text) RETURNS bytea
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN token ~ '^[0-9a-f]{64}$' THEN sha256(decode(token, 'hex')) END;
GRANT EXECUTE ON FUNCTION aclaim_park_token_hash(text) TO aclaim_coordinator;

-- ---- the outside system's callback ----
-- Finishes the parked job the token names, with `outcome`:
--   'completed' with `result` its result reference (as a holder's COMPLETE);
--   'failed'    with `result` the reason: a final failure;
--   'retry'     with `result` the reason: the attempt failed and the queue's retry policy applies.
-- Accepted only while the job is parked at the token's generation, before the park's deadline,
-- and only once: the job's row is locked first, so two callbacks with one token are decided one
-- after the other and the second is told 'replayed'. Returns one row: accepted, the job (NULL for
-- a token that names none), the reason ('accepted', 'replayed', 'stale', 'deadline_passed',
-- 'other_organization', 'unknown_token'), the job's state afterwards and a sentence for a person.
-- A refusal changes nothing but the audit: 'rejected' in job_events, or a park_refusals row.
-- `org`: as the other API functions (a bound producer acts for its own organization only; a
-- token of another is refused); `caller` labels the audit (the coordinator passes its HTTP peer).
CREATE FUNCTION aclaim_finish_parked(token text, outcome text, result text DEFAULT '',
                                     org bigint DEFAULT NULL, now_us bigint DEFAULT NULL,
                                     caller text DEFAULT NULL)
    RETURNS TABLE (accepted boolean, job_id bigint, reason text, state text, detail text)
    LANGUAGE plpgsql SECURITY DEFINER AS $$
#variable_conflict use_column
DECLARE
    o bigint := aclaim_api_org(org, true);
    now_ts timestamptz := aclaim_ts(coalesce(now_us, aclaim_us(statement_timestamp())));
    who text := coalesce(nullif(btrim(caller), ''), 'sql') || ' as ' || session_user;
    h bytea := aclaim_park_token_hash(token);
    p job_parks%ROWTYPE;
    j jobs%ROWTYPE;
    why text;
    says text;
    delay bigint;
    wake boolean;
BEGIN
    IF outcome IS NULL OR outcome NOT IN ('completed', 'failed', 'retry') THEN
        RAISE EXCEPTION 'finish_parked: outcome must be completed, failed or retry, not %',
            coalesce(outcome, 'NULL') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF outcome = 'completed' AND (result IS NULL OR result = '') THEN
        RAISE EXCEPTION 'finish_parked: a completion needs its result reference (result => ...)'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(coalesce(result, '')) > 4096 THEN
        RAISE EXCEPTION 'finish_parked: result is % bytes, over the limit of 4096',
            octet_length(result) USING ERRCODE = 'program_limit_exceeded';
    END IF;
    IF h IS NOT NULL THEN
        SELECT * INTO p FROM job_parks WHERE token_hash = h;
    END IF;
    IF h IS NULL OR p.token_hash IS NULL THEN
        INSERT INTO park_refusals (at, caller, reason, hash_head)
        VALUES (now_ts, who, CASE WHEN h IS NULL THEN 'malformed' ELSE 'unknown_token' END,
                coalesce(left(encode(h, 'hex'), 12), ''));
        RETURN QUERY SELECT false, NULL::bigint, 'unknown_token'::text, NULL::text,
            'the token names no parked job'::text;
        RETURN;
    END IF;
    IF o IS NOT NULL AND p.org_id <> o THEN
        INSERT INTO park_refusals (at, caller, reason, hash_head)
        VALUES (now_ts, who, 'other_organization', left(encode(h, 'hex'), 12));
        RETURN QUERY SELECT false, NULL::bigint, 'other_organization'::text, NULL::text,
            'the token is of another organization'::text;
        RETURN;
    END IF;
    -- The job's row first: its lock orders the callbacks of one token (and a callback against the
    -- reaper, a cancel or an operator), and each then reads the park as the last one left it.
    SELECT * INTO j FROM jobs WHERE id = p.job_id FOR UPDATE;
    SELECT * INTO p FROM job_parks WHERE token_hash = h;
    IF p.used_at IS NOT NULL THEN
        why := 'replayed';
        says := 'the token was used already, at ' || p.used_at || ' (' || p.outcome || ')';
    ELSIF j.state IS DISTINCT FROM 'parked' OR j.generation <> p.generation THEN
        why := 'stale';
        says := 'the job moved on: it is ' || coalesce(j.state, 'gone') || ' at generation '
                || coalesce(j.generation::text, '?') || ', the token is of generation '
                || p.generation;
    ELSIF j.deadline_at <= now_ts THEN
        why := 'deadline_passed';
        says := 'the park''s deadline ' || j.deadline_at || ' has passed; the retry policy applies';
    END IF;
    IF why IS NOT NULL THEN
        INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, detail)
        VALUES (p.job_id, p.org_id, p.generation, 'rejected', 'callback', now_ts,
                'park token refused (' || why || ') from ' || who || ': ' || says);
        RETURN QUERY SELECT false, p.job_id, why, j.state, says;
        RETURN;
    END IF;

    IF outcome = 'completed' THEN
        UPDATE jobs SET state = 'completed', completed_at = now_ts, result_ref = result
         WHERE id = j.id RETURNING * INTO j;
        says := result;
    ELSIF outcome = 'failed' THEN
        UPDATE jobs SET state = 'failed', completed_at = now_ts, last_error = result
         WHERE id = j.id RETURNING * INTO j;
        says := 'failure: ' || result;
    ELSE
        -- As store_sql.hpp's retry_or_discard for a retryable failure.
        delay := aclaim_retry_delay(j.id, j.attempts, j.backoff_base_us, j.backoff_cap_us);
        IF j.attempts >= j.max_attempts THEN
            UPDATE jobs SET state = 'discarded', completed_at = now_ts, last_error = result
             WHERE id = j.id RETURNING * INTO j;
            says := 'retryable failure: ' || result || '; attempt ' || j.attempts || ' of '
                    || j.max_attempts || ' was the last: discarded';
        ELSE
            UPDATE jobs SET state = CASE WHEN delay > 0 THEN 'scheduled' ELSE 'pending' END,
                            run_at = aclaim_ts(aclaim_us(now_ts) + delay),
                            assignee = NULL, claimed_at = NULL, completed_at = NULL,
                            last_error = result
             WHERE id = j.id RETURNING * INTO j;
            says := 'retryable failure: ' || result || '; retry ' || (j.attempts + 1) || ' of '
                    || j.max_attempts
                    || CASE WHEN j.state = 'scheduled' THEN ' at ' || j.run_at ELSE ' now' END;
            IF j.state = 'pending' THEN
                wake := aclaim_wake(j.org_id, j.queue);
            ELSE
                wake := aclaim_scheduled(aclaim_us(j.run_at));
            END IF;
        END IF;
    END IF;
    UPDATE job_parks SET used_at = now_ts, used_by = who, outcome = aclaim_finish_parked.outcome
     WHERE token_hash = h;
    INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, detail)
    VALUES (j.id, j.org_id, j.generation,
            CASE j.state WHEN 'completed' THEN 'completed' WHEN 'failed' THEN 'failed'
                         WHEN 'discarded' THEN 'discarded' ELSE 'released' END,
            'callback', now_ts, 'parked job finished by ' || who || ': ' || says);
    IF j.state IN ('completed', 'failed', 'discarded') THEN
        -- As sql::record_outcomes writes it for the statements in C++.
        INSERT INTO job_outcomes (org_id, job_id, outcome, queue, generation, attempts,
                                  result_ref, error, dedupe_key, at)
        VALUES (j.org_id, j.id, j.state, j.queue, j.generation, j.attempts,
                CASE WHEN j.state = 'completed' THEN j.result_ref END,
                CASE WHEN j.state <> 'completed' THEN j.last_error END, j.dedupe_key,
                j.completed_at);
        IF EXISTS (SELECT 1 FROM result_groups g WHERE g.org_id = j.org_id) THEN
            PERFORM pg_notify('aclaim_outcomes', j.org_id::text);
        END IF;
        IF j.state = 'completed' THEN
            PERFORM pg_notify('aclaim_results', j.org_id::text);
        END IF;
    END IF;
    RETURN QUERY SELECT true, j.id, 'accepted'::text, j.state, says;
END $$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION aclaim_finish_parked(text, text, text, bigint, bigint, text) '
                   'SET search_path = %I, pg_temp', current_schema());
END $$;
REVOKE ALL ON FUNCTION aclaim_finish_parked(text, text, text, bigint, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION aclaim_finish_parked(text, text, text, bigint, bigint, text)
    TO aclaim_producer, aclaim_coordinator;

-- ---- cancel and the per-state counters: parked among them ----
-- A parked job is cancellable (it has no live holder to tell, so only an assigned one is revoked;
-- its token is refused 'stale' from then on) and is counted among the resting states: as 0014's
-- index diet, the states no hot transition writes are counted through jobs_org_state, and parked
-- is one of them (a PARK and its callback are one row change each, not the claim and completion
-- path). Cancel and 0014's three readers of the index are restated with 'parked' and 'waiting' in
-- their lists by the next migration (0024_job_dependencies.sql), which changes them too.
DROP INDEX jobs_org_state;
CREATE INDEX jobs_org_state ON jobs (org_id, state, queue, run_at)
    WHERE state IN ('pending', 'scheduled', 'failed', 'discarded', 'cancelled', 'quarantined',
                    'parked');
