-- Adds the edges of jobs just enqueued by aclaim_enqueue_jobs: `job_ids` the call's jobs in the
-- caller's order, `created` whether each was created (a job a dedupe key returned is left as it
-- is: its edges are those it was enqueued with), and one array element per edge: dependent
-- `edge_n` (1-based index in the call) waits for `edge_on`, a job id (> 0) or -k for job k of
-- the same call, with policy `edge_policy` (NULL: 'cancel'). Every dependency must be a job of
-- `org`: only the organization's own rows are read, so another organization's job is refused
-- exactly as one that does not exist. A cycle among the call's jobs is refused, naming a job on
-- it (a job enqueued earlier cannot depend on one enqueued now, so no other cycle can form). Each
-- dependency's row is locked and flagged has_dependents before its state is read, so an ending
-- that commits meanwhile is seen (see aclaim_dependencies_settled). A dependent with an edge still
-- open waits; dependencies that already ended settle at once (a completed one is satisfied, a
-- failed one applies the policy).
CREATE OR REPLACE FUNCTION aclaim_add_dependencies(org bigint, now_us bigint, job_ids bigint[],
                                        created boolean[], edge_n integer[], edge_on bigint[],
                                        edge_policy text[])
    RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    bad record;
    e_job bigint[];
    e_on bigint[];
    e_policy text[];
    t_id bigint[];
    t_org bigint[];
    t_state text[];
    ended_ids bigint[];
    ended_states text[];
BEGIN
    IF cardinality(edge_n) IS DISTINCT FROM cardinality(edge_on)
       OR coalesce(cardinality(edge_policy), cardinality(edge_n))
          IS DISTINCT FROM cardinality(edge_n) THEN
        RAISE EXCEPTION 'enqueue: dependencies must be given as dependents and dependencies of '
                        'one length and NULL or as many policies (% dependents, % dependencies, '
                        '% policies)', cardinality(edge_n), cardinality(edge_on),
                        cardinality(edge_policy)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT e.k, e.n, e.on_, e.policy INTO bad
      FROM unnest(edge_n, edge_on, edge_policy) WITH ORDINALITY AS e(n, on_, policy, k)
     WHERE e.n IS NULL OR e.n NOT BETWEEN 1 AND cardinality(job_ids) OR e.on_ IS NULL
        OR e.on_ = 0 OR -e.on_ > cardinality(job_ids)
        OR coalesce(e.policy, 'cancel') NOT IN ('cancel', 'run')
     ORDER BY e.k LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'enqueue: dependency % of this call (job % depends on %, policy %) is '
                        'invalid: the dependent is a job of this call (1 to %), the dependency a '
                        'job id or -k for job k of this call, the policy cancel or run; nothing '
                        'was enqueued', bad.k, bad.n, bad.on_, coalesce(bad.policy, 'cancel'),
                        cardinality(job_ids)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT array_agg(x.job ORDER BY x.job, x.dep), array_agg(x.dep ORDER BY x.job, x.dep),
           array_agg(x.policy ORDER BY x.job, x.dep)
      INTO e_job, e_on, e_policy
      FROM (SELECT DISTINCT ON (job_ids[e.n], dep) job_ids[e.n] AS job,
                   CASE WHEN e.on_ > 0 THEN e.on_ ELSE job_ids[-e.on_] END AS dep,
                   coalesce(e.policy, 'cancel') AS policy
              FROM unnest(edge_n, edge_on, edge_policy) WITH ORDINALITY AS e(n, on_, policy, k)
             WHERE coalesce(created[e.n], false)
             ORDER BY job_ids[e.n], dep, e.k) AS x;
    IF e_job IS NULL THEN
        RETURN;
    END IF;

    WITH RECURSIVE edge AS (
        SELECT * FROM unnest(e_job, e_on) AS e(job, dep)
    ), reach(start, at) AS (
        SELECT job, dep FROM edge
        UNION
        SELECT r.start, e.dep FROM reach r JOIN edge e ON e.job = r.at
    )
    SELECT r.start INTO bad FROM reach r WHERE r.start = r.at ORDER BY r.start LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'enqueue: the dependencies of this call form a cycle through job % of '
                        'this call; nothing was enqueued', array_position(job_ids, bad.start)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- Lock each dependency (id order), then judge it on its newest row version.
    SELECT array_agg(t.id ORDER BY t.id), array_agg(t.org_id ORDER BY t.id),
           array_agg(t.state ORDER BY t.id)
      INTO t_id, t_org, t_state
      FROM (SELECT j.id, j.org_id, j.state FROM jobs j
             WHERE j.id = ANY(e_on) AND j.org_id = aclaim_add_dependencies.org
             ORDER BY j.id FOR NO KEY UPDATE OF j) AS t;
    -- Only the organization's own rows are read (and locked): another organization's job is
    -- refused exactly as one that does not exist, in the same words, code and time, so that a
    -- producer cannot learn which ids exist elsewhere.
    SELECT d INTO bad FROM unnest(e_on) AS d
     WHERE d <> ALL(coalesce(t_id, '{}')) ORDER BY d LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'enqueue: dependency % is not a job of organization % (no such job, or it '
                        'was pruned): a job depends only on jobs of its own organization; nothing '
                        'was enqueued', bad.d, org
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    UPDATE jobs j SET has_dependents = true WHERE j.id = ANY(t_id) AND NOT j.has_dependents;

    INSERT INTO job_dependencies (org_id, job_id, depends_on, policy)
    SELECT org, e.job, e.dep, e.policy FROM unnest(e_job, e_on, e_policy) AS e(job, dep, policy)
    ON CONFLICT DO NOTHING;
    UPDATE jobs j SET state = 'waiting'
     WHERE j.id = ANY(e_job) AND j.state IN ('pending', 'scheduled');

    SELECT array_agg(t.id), array_agg(t.state) INTO ended_ids, ended_states
      FROM unnest(t_id, t_state) AS t(id, state)
     WHERE t.state IN ('completed', 'failed', 'discarded', 'cancelled');
    PERFORM aclaim_dependencies_settled(now_us, ended_ids, ended_states);
END $$;
