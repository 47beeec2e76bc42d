-- Finishes the parked job the token names, with `outcome`:
--   'completed' with `result` its result reference (as a holder's COMPLETE);
--   'failed'    with `result` the reason: a final failure;
--   'retry'     with `result` the reason: the attempt failed and the queue's retry policy applies.
-- Accepted only while the job is parked at the token's generation, before the park's deadline,
-- and only once: the job's row is locked first, so two callbacks with one token are decided one
-- after the other and the second is told 'replayed'. Returns one row: accepted, the job (NULL for
-- a token that names none), the reason ('accepted', 'replayed', 'stale', 'deadline_passed',
-- 'other_organization', 'unknown_token'), the job's state afterwards and a sentence for a person. A refusal changes
-- nothing but the audit: 'rejected' in job_events, or, for a refusal that names no job, a count
-- (aclaim_count_park_refusal). A token of another organization is answered exactly as one that
-- names no job. `org`: as the other API functions (a bound producer acts for its own organization
-- only); `caller` labels the audit (the coordinator passes its HTTP peer).
CREATE OR REPLACE FUNCTION aclaim_finish_parked(token text, outcome text, result text DEFAULT '',
                                     org bigint DEFAULT NULL, now_us bigint DEFAULT NULL,
                                     caller text DEFAULT NULL)
    RETURNS TABLE (accepted boolean, job_id bigint, reason text, state text, detail text)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
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

REVOKE ALL ON FUNCTION aclaim_finish_parked(text, text, text, bigint, bigint, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION aclaim_finish_parked(text, text, text, bigint, bigint, text) TO aclaim_coordinator;
GRANT EXECUTE ON FUNCTION aclaim_finish_parked(text, text, text, bigint, bigint, text) TO aclaim_producer;
