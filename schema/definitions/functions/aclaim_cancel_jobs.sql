-- Cancels each listed job that is pending, scheduled, waiting, parked or assigned (of
-- organization `org`, or of any when it is NULL), in id order: terminal at once, audited with who
-- and why. An assigned job keeps its holder in the row, and the holder's coordinator is told on
-- aclaim_revoke (delivered at commit) so that it pushes REVOKED "cancelled" at once; the holder's
-- completion is refused "cancelled" from then on. A parked job has no live holder to tell: its
-- token is refused 'stale' from then on. Cancelled jobs that have dependents are settled in the
-- same transaction (their dependents' policies apply). Runs as the caller. The operator's
-- cancel and the producer API both call it.
CREATE OR REPLACE FUNCTION aclaim_cancel_jobs(org bigint, job_ids bigint[], actor text,
                                              reason text, now_us bigint)
    RETURNS TABLE (id bigint, org_id bigint, generation bigint, was text, holder text)
    LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    c record;
    settle bigint[] := '{}';
BEGIN
    FOR c IN
        WITH picked AS MATERIALIZED (
            SELECT j.id, j.state AS was, j.assignee AS holder FROM jobs j
             WHERE j.id = ANY(job_ids) AND (org IS NULL OR j.org_id = org)
               AND j.state IN ('pending', 'scheduled', 'assigned', 'parked', 'waiting')
             ORDER BY j.id FOR UPDATE
        ), done AS (
            UPDATE jobs j
               SET state = 'cancelled', completed_at = aclaim_ts(now_us), lease_expires_at = NULL,
                   last_error = 'cancelled by ' || actor || ': ' || reason
              FROM picked
             WHERE j.id = picked.id
            RETURNING j.id, j.org_id, j.generation, j.queue, j.attempts, j.last_error,
                      j.dedupe_key, j.completed_at, j.has_dependents, picked.was, picked.holder
        ), logged AS (
            INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, detail)
            SELECT d.id, d.org_id, d.generation, 'cancelled', actor, aclaim_ts(now_us),
                   'was ' || d.was || coalesce(', held by ' || d.holder, '') || ': ' || reason
              FROM done d
        ), recorded AS (
            -- As sql::record_outcomes writes it for the statements in C++.
            INSERT INTO job_outcomes (org_id, job_id, outcome, queue, generation, attempts,
                                      error, dedupe_key, at)
            SELECT d.org_id, d.id, 'cancelled', d.queue, d.generation, d.attempts, d.last_error,
                   d.dedupe_key, d.completed_at
              FROM done d
            RETURNING pg_notify('aclaim_outcomes', org_id::text)
        )
        SELECT d.id, d.org_id, d.generation, d.was, d.holder, d.has_dependents
          FROM done d ORDER BY d.id
    LOOP
        IF c.was = 'assigned' THEN
            PERFORM pg_notify('aclaim_revoke', c.org_id || ':' || c.id || ':' || c.generation
                                               || ':cancelled:' || c.holder);
        END IF;
        IF c.has_dependents THEN
            settle := settle || c.id;
        END IF;
        id := c.id;
        org_id := c.org_id;
        generation := c.generation;
        was := c.was;
        holder := coalesce(c.holder, '');
        RETURN NEXT;
    END LOOP;
    IF cardinality(settle) > 0 THEN
        PERFORM aclaim_dependencies_settled(
            now_us, settle, array_fill('cancelled'::text, ARRAY[cardinality(settle)]));
    END IF;
END $$;
