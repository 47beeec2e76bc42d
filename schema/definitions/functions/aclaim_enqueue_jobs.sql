-- Enqueues many jobs: one array element per job, each through aclaim_enqueue_job, which
-- returns the existing job for a dedupe key that is still held. `payloads` decides the number of
-- jobs; every other array is NULL (the default for every job) or of the same length, and a NULL
-- element takes the default (the queue's setting, then the built-in one). Jobs without a key go
-- first, in order; keyed ones after, in key order: an insert waits for another transaction's
-- uncommitted holder of its key, and producers that take keys in one order never wait on each
-- other in a cycle. Rows come back in the caller's order, n counting from 1. Runs as the caller:
-- row-level security applies. The store's sql::kEnqueue and the producer API both call it.
CREATE OR REPLACE FUNCTION aclaim_enqueue_jobs(
    org bigint, now_us bigint, queues text[], payloads text[], priorities integer[],
    run_at_us bigint[], max_attempts integer[], backoff_base_us bigint[], backoff_cap_us bigint[],
    run_timeout_us bigint[], dedupe_keys text[], dedupe_window_us bigint)
    RETURNS TABLE (n bigint, id bigint, created boolean, state text)
    LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    job_count integer := coalesce(cardinality(payloads), 0);
    too_big record;
BEGIN
    IF payloads IS NULL THEN
        RAISE EXCEPTION 'enqueue: payloads must be an array with one element per job'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF coalesce(cardinality(queues), job_count) <> job_count
       OR coalesce(cardinality(priorities), job_count) <> job_count
       OR coalesce(cardinality(run_at_us), job_count) <> job_count
       OR coalesce(cardinality(max_attempts), job_count) <> job_count
       OR coalesce(cardinality(backoff_base_us), job_count) <> job_count
       OR coalesce(cardinality(backoff_cap_us), job_count) <> job_count
       OR coalesce(cardinality(run_timeout_us), job_count) <> job_count
       OR coalesce(cardinality(dedupe_keys), job_count) <> job_count THEN
        RAISE EXCEPTION 'enqueue: % payloads, but the other arrays hold % queues, % priorities, '
                        '% run_at, % max_attempts, % backoff bases, % backoff caps, '
                        '% run timeouts and % dedupe keys (each must be NULL or hold one per job)',
            job_count, cardinality(queues), cardinality(priorities), cardinality(run_at_us),
            cardinality(max_attempts), cardinality(backoff_base_us), cardinality(backoff_cap_us),
            cardinality(run_timeout_us), cardinality(dedupe_keys)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT p.k, octet_length(p.payload) AS bytes INTO too_big
      FROM unnest(payloads) WITH ORDINALITY AS p(payload, k)
     WHERE octet_length(p.payload) > aclaim_max_payload_bytes()
     ORDER BY p.k LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'enqueue: the payload of job % of this call is % bytes, over the limit of % '
                        'bytes; nothing was enqueued', too_big.k, too_big.bytes,
                        aclaim_max_payload_bytes()
            USING ERRCODE = 'program_limit_exceeded',
                  HINT = 'Store the document elsewhere and enqueue a reference to it.';
    END IF;
    RETURN QUERY
    SELECT p.n, e.id, e.created, e.state
      FROM (SELECT * FROM unnest(queues, payloads, priorities, run_at_us, max_attempts,
                                 backoff_base_us, backoff_cap_us, run_timeout_us, dedupe_keys)
                          WITH ORDINALITY AS p(queue, payload, priority, run_at, max_attempts,
                                               base, cap, timeout, dedupe_key, n)
             ORDER BY p.dedupe_key IS NOT NULL, p.dedupe_key, p.n) AS p
     CROSS JOIN LATERAL aclaim_enqueue_job(org, now_us, p.queue, p.payload, p.priority,
                                           p.run_at, p.max_attempts, p.base, p.cap, p.timeout,
                                           p.dedupe_key, dedupe_window_us) AS e
     ORDER BY p.n;
END $$;

-- With dependencies: enqueues as the overload above, adds the call's edges
-- (aclaim_add_dependencies), then writes one 'waiting' event for each job the call created that
-- waits: its open edges in id order (the first 20, and how many more), each with its policy. A
-- job whose dependencies had all ended already was audited 'unblocked' or 'cancelled' by the
-- settling and gets none; a job a dedupe key returned was audited when it was created.
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

-- With exclusions: enqueues as the overload with dependencies and adds the call's exclusions in
-- the same transaction. The store calls it (sql::kEnqueueExcluding) only for a call with
-- exclusions, so an enqueue without any pays nothing for them.
CREATE OR REPLACE FUNCTION aclaim_enqueue_jobs(
    org bigint, now_us bigint, queues text[], payloads text[], priorities integer[],
    run_at_us bigint[], max_attempts integer[], backoff_base_us bigint[], backoff_cap_us bigint[],
    run_timeout_us bigint[], dedupe_keys text[], dedupe_window_us bigint,
    depends_n integer[], depends_on bigint[], on_failure text[],
    excl_n integer[], excl_key text[], excl_job bigint[])
    RETURNS TABLE (n bigint, id bigint, created boolean, state text)
    LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    ns bigint[];
    ids bigint[];
    made boolean[];
    states text[];
BEGIN
    IF excl_n IS NULL AND excl_key IS NULL AND excl_job IS NULL THEN
        RETURN QUERY
        SELECT e.n, e.id, e.created, e.state
          FROM aclaim_enqueue_jobs(org, now_us, queues, payloads, priorities, run_at_us,
                                   max_attempts, backoff_base_us, backoff_cap_us, run_timeout_us,
                                   dedupe_keys, dedupe_window_us, depends_n, depends_on,
                                   on_failure) AS e;
        RETURN;
    END IF;
    PERFORM aclaim_flag_exclusions(org, now_us, queues, excl_n);
    SELECT array_agg(e.n ORDER BY e.n), array_agg(e.id ORDER BY e.n),
           array_agg(e.created ORDER BY e.n), array_agg(e.state ORDER BY e.n)
      INTO ns, ids, made, states
      FROM aclaim_enqueue_jobs(org, now_us, queues, payloads, priorities, run_at_us,
                               max_attempts, backoff_base_us, backoff_cap_us, run_timeout_us,
                               dedupe_keys, dedupe_window_us, depends_n, depends_on,
                               on_failure) AS e;
    PERFORM aclaim_add_exclusions(org, ids, made, excl_n, excl_key, excl_job);
    RETURN QUERY SELECT e.n, e.id, e.made, e.st FROM unnest(ns, ids, made, states)
                     AS e(n, id, made, st) ORDER BY e.n;
END $$;
