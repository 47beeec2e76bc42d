-- Refused park callbacks counted, not logged one row each (issue: a forged callback cost the
-- caller nothing and the database one never-pruned row; about 184 a second from one client, some
-- 7 GB a day).
--
-- park_refusal_counts holds one row per hour, source and reason with the number of refusals, the
-- first and last of them and the hash head of the last token: enough to tell who is guessing,
-- how much and since when (the question 0023's park_refusals answered), in a size that does not
-- follow the guesser's rate. Two bounds hold it whatever the callers do:
--   - per hour at most aclaim_park_refusal_sources() sources get a row of their own; the
--     refusals of any further source are counted under '(other sources)', so a caller with many
--     addresses (or a producer that names a new `caller` each time) cannot grow the table;
--   - rows are kept aclaim_park_refusals_kept_us() (30 days), then removed by the coordinators'
--     retention pass through aclaim_prune_park_refusals, a bounded batch at a time.
-- So the table holds at most 30 days x 24 hours x (300 + 3) rows.
--
-- The rows of park_refusals are folded into the counts (their caller without the HTTP port, which
-- differs per connection), and the table is dropped.

CREATE TABLE park_refusal_counts (
    period_start   timestamptz NOT NULL,
    source         text        NOT NULL CHECK (octet_length(source) <= 200),
    reason         text        NOT NULL
                   CHECK (reason IN ('malformed', 'unknown_token', 'other_organization')),
    refusals       bigint      NOT NULL CHECK (refusals > 0),
    first_at       timestamptz NOT NULL,
    last_at        timestamptz NOT NULL,
    last_hash_head text        NOT NULL DEFAULT '',
    PRIMARY KEY (period_start, source, reason)
);
ALTER TABLE park_refusal_counts ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON park_refusal_counts TO aclaim_coordinator;
CREATE POLICY coordinator_reads ON park_refusal_counts FOR SELECT TO aclaim_coordinator
    USING (true);

-- Sources with a row of their own per hour; the rest share '(other sources)'.
CREATE FUNCTION aclaim_park_refusal_sources() RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURN 300;
-- How long a count is kept: 30 days, in microseconds.
CREATE FUNCTION aclaim_park_refusals_kept_us() RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE RETURN 30::bigint * 86400 * 1000000;

INSERT INTO park_refusal_counts (period_start, source, reason, refusals, first_at, last_at,
                                 last_hash_head)
SELECT aclaim_ts(aclaim_us(r.at) / 3600000000 * 3600000000),
       left(regexp_replace(r.caller, '^(http .*):[0-9]+( as .*)$', '\1\2'), 200), r.reason,
       count(*), min(r.at), max(r.at), (array_agg(r.hash_head ORDER BY r.at DESC))[1]
  FROM park_refusals r
 GROUP BY 1, 2, 3;
DROP TABLE park_refusals;
DROP FUNCTION park_refusals_append_only();

-- Counts one refused token of `who` for `why` in the hour of `at_ts`. Called by
-- aclaim_finish_parked, which runs as the owner; nobody else may count.
CREATE FUNCTION aclaim_count_park_refusal(at_ts timestamptz, who text, why text, head text)
    RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    -- The hour in UTC, whatever the session's time zone.
    period timestamptz := aclaim_ts(aclaim_us(at_ts) / 3600000000 * 3600000000);
    src text := left(who, 200);
BEGIN
    UPDATE park_refusal_counts c
       SET refusals = c.refusals + 1, last_at = greatest(c.last_at, at_ts), last_hash_head = head
     WHERE c.period_start = period AND c.source = src AND c.reason = why;
    IF FOUND THEN
        RETURN;
    END IF;
    IF (SELECT count(*) FROM (SELECT 1 FROM park_refusal_counts c WHERE c.period_start = period
                               LIMIT aclaim_park_refusal_sources()) AS x)
       >= aclaim_park_refusal_sources() THEN
        src := '(other sources)';
    END IF;
    INSERT INTO park_refusal_counts AS c (period_start, source, reason, refusals, first_at,
                                          last_at, last_hash_head)
    VALUES (period, src, why, 1, at_ts, at_ts, head)
    ON CONFLICT (period_start, source, reason) DO UPDATE
       SET refusals = c.refusals + 1, last_at = greatest(c.last_at, excluded.last_at),
           last_hash_head = excluded.last_hash_head;
END $$;
REVOKE ALL ON FUNCTION aclaim_count_park_refusal(timestamptz, text, text, text) FROM PUBLIC;

-- Removes at most `batch` counts whose hour ended aclaim_park_refusals_kept_us() before now_us;
-- returns how many. The coordinators' retention pass calls it until it comes back short.
-- SECURITY DEFINER: the coordinator's role may not delete by itself, only through this predicate.
CREATE FUNCTION aclaim_prune_park_refusals(now_us bigint, batch integer) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    gone integer;
BEGIN
    DELETE FROM park_refusal_counts c
     WHERE (c.period_start, c.source, c.reason) IN (
        SELECT o.period_start, o.source, o.reason FROM park_refusal_counts o
         WHERE o.period_start < aclaim_ts(now_us - aclaim_park_refusals_kept_us() - 3600000000)
         ORDER BY o.period_start LIMIT greatest(batch, 0));
    GET DIAGNOSTICS gone = ROW_COUNT;
    RETURN gone;
END $$;

-- ---- the callback, counting its refusals ----
-- As 0023's, but a refusal that names no job is counted (aclaim_count_park_refusal), and a token
-- of another organization is answered exactly as one that names no job.
CREATE OR REPLACE FUNCTION aclaim_finish_parked(token text, outcome text, result text DEFAULT '',
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
    -- A token of another organization is answered as one that names nothing: the caller learns
    -- nothing of the other's parks. The count below keeps the difference for the operator.
    IF h IS NULL OR p.token_hash IS NULL OR (o IS NOT NULL AND p.org_id <> o) THEN
        PERFORM aclaim_count_park_refusal(
            now_ts, who,
            CASE WHEN h IS NULL THEN 'malformed'
                 WHEN p.token_hash IS NULL THEN 'unknown_token' ELSE 'other_organization' END,
            coalesce(left(encode(h, 'hex'), 12), ''));
        RETURN QUERY SELECT false, NULL::bigint, 'unknown_token'::text, NULL::text,
            'the token names no parked job'::text;
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
    EXECUTE format('ALTER FUNCTION aclaim_prune_park_refusals(bigint, integer) '
                   'SET search_path = %I, pg_temp', current_schema());
END $$;
REVOKE ALL ON FUNCTION aclaim_prune_park_refusals(bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION aclaim_prune_park_refusals(bigint, integer) TO aclaim_coordinator;
