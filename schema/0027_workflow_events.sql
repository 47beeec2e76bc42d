-- Workflows where operators look: the audit log says what a job waits for from the moment it
-- starts waiting, and the workflow view (console, `aclaimctl workflow show`, common/ops
-- workflow_sql.hpp) finds a job's dependents by index whether or not their edge has resolved.
-- docs/operations.md ("Workflows") is the operator's guide.
--
-- What a job without dependencies pays: nothing. The new event is written only by the branch of
-- aclaim_enqueue_jobs that adds dependencies, and the new index holds job_dependencies' rows only.

-- ---- the audit log's new kind ----
-- waiting: the job was enqueued with dependencies that had not all ended; detail names them and
-- each edge's policy. The existing kinds complete the story: 'unblocked' when the last one ends,
-- 'cancelled' with worker 'dependency <id>' when a failed one cancels it (0024).
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
                   'ARRAY[''waiting''::text, ');
    EXECUTE 'ALTER TABLE job_events DROP CONSTRAINT job_events_kind_check, '
            'ADD CONSTRAINT job_events_kind_check ' || def || ' NOT VALID';
END $$;

-- ---- the dependents of any job ----
-- job_dependencies_on (0024) holds only the edges still open, which is what settling needs; a
-- workflow's view walks from a finished job to its dependents too. Only edges are indexed, so
-- only enqueues with dependencies and their settling pay for it.
CREATE INDEX job_dependencies_dependents ON job_dependencies (depends_on, job_id);

-- ---- enqueue with dependencies ----
-- As 0024's, and then one 'waiting' event for each job the call created that waits: its open
-- edges in id order (the first 20, and how many more), each with its policy. A job whose
-- dependencies had all ended already was audited 'unblocked' or 'cancelled' by the settling and
-- gets none; a job a dedupe key returned was audited when it was created.
CREATE OR REPLACE FUNCTION aclaim_enqueue_jobs(
    org bigint, now_us bigint, queues text[], payloads text[], priorities integer[],
    run_at_us bigint[], max_attempts integer[], backoff_base_us bigint[], backoff_cap_us bigint[],
    run_timeout_us bigint[], dedupe_keys text[], dedupe_window_us bigint,
    depends_n integer[], depends_on bigint[], on_failure text[])
    RETURNS TABLE (n bigint, id bigint, created boolean, state text)
    LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    ns bigint[];
    ids bigint[];
    made boolean[];
BEGIN
    IF depends_n IS NULL AND depends_on IS NULL AND on_failure IS NULL THEN
        RETURN QUERY
        SELECT e.n, e.id, e.created, e.state
          FROM aclaim_enqueue_jobs(org, now_us, queues, payloads, priorities, run_at_us,
                                   max_attempts, backoff_base_us, backoff_cap_us, run_timeout_us,
                                   dedupe_keys, dedupe_window_us) AS e;
        RETURN;
    END IF;
    SELECT array_agg(e.n ORDER BY e.n), array_agg(e.id ORDER BY e.n),
           array_agg(e.created ORDER BY e.n)
      INTO ns, ids, made
      FROM aclaim_enqueue_jobs(org, now_us, queues, payloads, priorities, run_at_us,
                               max_attempts, backoff_base_us, backoff_cap_us, run_timeout_us,
                               dedupe_keys, dedupe_window_us) AS e;
    PERFORM aclaim_add_dependencies(org, now_us, ids, made, depends_n, depends_on, on_failure);

    INSERT INTO job_events (job_id, org_id, generation, kind, at, detail)
    SELECT j.id, j.org_id, j.generation, 'waiting', aclaim_ts(now_us),
           'waits for ' || w.n || CASE w.n WHEN 1 THEN ' job: ' ELSE ' jobs: ' END || w.listed
           || CASE WHEN w.n > 20 THEN ' and ' || (w.n - 20) || ' more' ELSE '' END
      FROM unnest(ids, made) AS c(id, made)
      JOIN jobs j ON j.id = c.id AND j.state = 'waiting'
      CROSS JOIN LATERAL (
          SELECT count(*) AS n,
                 string_agg(d.depends_on || ' (' || d.policy || ')', ', ' ORDER BY d.depends_on)
                     FILTER (WHERE d.k <= 20) AS listed
            FROM (SELECT d.depends_on, d.policy,
                         row_number() OVER (ORDER BY d.depends_on) AS k
                    FROM job_dependencies d
                   WHERE d.job_id = c.id AND d.resolved IS NULL) AS d) AS w
     WHERE c.made AND w.n > 0
     ORDER BY j.id;

    RETURN QUERY
    SELECT e.n, e.id, e.made, j.state
      FROM unnest(ns, ids, made) AS e(n, id, made) JOIN jobs j ON j.id = e.id
     ORDER BY e.n;
END $$;
