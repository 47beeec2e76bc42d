-- Called by every statement that ends jobs, in its transaction, with the ended jobs that have
-- dependents (`ended`) and how each ended (`outcomes`); STRICT, so a statement whose ended rows
-- have none passes NULL arrays and the function is not called at all. Resolves each waiting edge
-- on them; a dependent whose edge says 'cancel' and whose dependency did not complete is cancelled
-- (audited, its outcome recorded, and the same applies to its own dependents: the loop); a
-- dependent with no edge left unresolved becomes pending (scheduled when its run_at is still
-- ahead), audited 'unblocked', and its queue is woken at commit. Returns how many dependents
-- changed state.
-- Concurrency: the waiting dependents are locked first, in id order, and the edges are read after
-- the lock by later statements (each takes a new snapshot under READ COMMITTED): two transactions
-- ending two dependencies of one job take turns on its row, and the second sees the first's
-- resolution, so exactly the last one unblocks it. A dependent's edge is added under a lock on
-- the dependency's row (aclaim_add_dependencies), so an ending either sees the flag and the edge or
-- runs before them, and then the enqueue sees the ended state.
CREATE OR REPLACE FUNCTION aclaim_dependencies_settled(now_us bigint, ended bigint[], outcomes text[])
    RETURNS integer LANGUAGE plpgsql STRICT AS $$
DECLARE
    changed integer := 0;
    n integer;
    doomed bigint[];
    touched bigint[];
BEGIN
    WHILE cardinality(ended) > 0 LOOP
        PERFORM FROM jobs j
         WHERE j.id IN (SELECT d.job_id FROM job_dependencies d
                         WHERE d.depends_on = ANY(ended) AND d.resolved IS NULL)
           AND j.state = 'waiting'
         ORDER BY j.id FOR NO KEY UPDATE OF j;

        WITH e AS (
            SELECT DISTINCT ON (id) id, outcome FROM unnest(ended, outcomes) AS e(id, outcome)
        ), r AS (
            UPDATE job_dependencies d SET resolved = e.outcome, resolved_at = aclaim_ts(now_us)
              FROM e
             WHERE d.depends_on = e.id AND d.resolved IS NULL
            RETURNING d.job_id, d.policy, d.resolved
        )
        SELECT array_agg(DISTINCT r.job_id)
                   FILTER (WHERE r.resolved <> 'completed' AND r.policy = 'cancel'),
               array_agg(DISTINCT r.job_id)
          INTO doomed, touched
          FROM r;
        EXIT WHEN touched IS NULL;

        WITH why AS (
            SELECT DISTINCT ON (d.job_id) d.job_id, d.depends_on AS dep, d.resolved AS outcome
              FROM job_dependencies d
             WHERE d.job_id = ANY(coalesce(doomed, '{}')) AND d.policy = 'cancel'
               AND d.resolved <> 'completed'
             ORDER BY d.job_id, d.depends_on
        ), c AS (
            UPDATE jobs j
               SET state = 'cancelled', completed_at = aclaim_ts(now_us),
                   last_error = 'cancelled: dependency ' || why.dep || ' ended ' || why.outcome
              FROM why
             WHERE j.id = why.job_id AND j.state = 'waiting'
            RETURNING j.id, j.org_id, j.generation, j.queue, j.attempts, j.last_error,
                      j.dedupe_key, j.completed_at, j.has_dependents, why.dep, why.outcome
        ), logged AS (
            INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, detail)
            SELECT c.id, c.org_id, c.generation, 'cancelled', 'dependency ' || c.dep,
                   aclaim_ts(now_us),
                   'was waiting: dependency ' || c.dep || ' ended ' || c.outcome
                   || ' and the edge''s policy is cancel'
              FROM c
        ), recorded AS (
            -- As sql::record_outcomes writes it for the statements in C++.
            INSERT INTO job_outcomes (org_id, job_id, outcome, queue, generation, attempts,
                                      error, dedupe_key, at)
            SELECT c.org_id, c.id, 'cancelled', c.queue, c.generation, c.attempts, c.last_error,
                   c.dedupe_key, c.completed_at
              FROM c
            RETURNING CASE WHEN EXISTS (SELECT 1 FROM result_groups g
                                         WHERE g.org_id = job_outcomes.org_id)
                           THEN pg_notify('aclaim_outcomes', org_id::text) END
        )
        SELECT count(*), array_agg(c.id) FILTER (WHERE c.has_dependents)
          INTO n, ended
          FROM c;
        changed := changed + n;

        WITH u AS (
            UPDATE jobs j
               SET state = CASE WHEN j.run_at > aclaim_ts(now_us) THEN 'scheduled'
                                ELSE 'pending' END
             WHERE j.id = ANY(touched) AND j.state = 'waiting'
               AND NOT EXISTS (SELECT FROM job_dependencies d
                                WHERE d.job_id = j.id AND d.resolved IS NULL)
            RETURNING j.id, j.org_id, j.generation, j.queue, j.state, aclaim_us(j.run_at) AS run_us
        ), logged AS (
            INSERT INTO job_events (job_id, org_id, generation, kind, at, detail)
            SELECT u.id, u.org_id, u.generation, 'unblocked', aclaim_ts(now_us),
                   CASE u.state WHEN 'scheduled' THEN 'scheduled: run at ' || aclaim_ts(u.run_us)
                                ELSE 'pending' END
              FROM u
        )
        SELECT count(*) INTO n FROM (
            SELECT CASE u.state WHEN 'pending' THEN aclaim_wake(u.org_id, u.queue)
                                ELSE aclaim_scheduled(u.run_us) END
              FROM u) AS woken;
        changed := changed + n;

        outcomes := array_fill('cancelled'::text, ARRAY[coalesce(cardinality(ended), 0)]);
        EXIT WHEN ended IS NULL;
    END LOOP;
    RETURN changed;
END $$;
