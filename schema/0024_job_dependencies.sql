-- Workflows as data: a job may depend on other jobs of its organization, enqueued earlier or in
-- the same call, and waits in the state 'waiting' until every dependency has ended. The accepted
-- transition that ends a job's last dependency makes it claimable in the same transaction, so a
-- stale (refused) completion unblocks nothing and no claimer sees the dependent before the
-- completion commits. docs/integration.md ("Workflows") is the user's guide.
--
-- What a job that nothing depends on pays: nothing. Only a job something depends on has
-- jobs.has_dependents set (by the dependent's enqueue); every statement that can end a job
-- (record_outcomes' statements, common/store/store_sql.hpp settle_dependents) returns the flag from
-- the row it already updates and calls aclaim_dependencies_settled only for the rows that have it:
-- no extra read or write otherwise (docs/performance.md, "Workflow dependencies and the hot path").

-- ---- the state ----
-- waiting: enqueued with dependencies that have not all ended; never claimed, never promoted.
-- The list is the current one, with 'parked' (0023) and 'waiting'.
ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check CHECK (state IN (
    'pending', 'scheduled', 'assigned', 'completed', 'failed', 'discarded', 'cancelled',
    'quarantined', 'parked', 'waiting'));
-- A constraint of its own rather than a new waiting_has_no_owner, which 0023 may have redefined.
ALTER TABLE jobs ADD CONSTRAINT dependent_has_no_owner CHECK (state <> 'waiting' OR (
    assignee IS NULL AND claimed_at IS NULL AND lease_expires_at IS NULL
    AND completed_at IS NULL AND result_ref IS NULL));

-- Set only on a job that some other job depends on. A fast default: adding it rewrites nothing,
-- and the rows of jobs without dependents never change for it.
ALTER TABLE jobs ADD COLUMN has_dependents boolean NOT NULL DEFAULT false;

-- Waiting jobs are few and rest; their own small index serves /metrics, the console and
-- `aclaimctl queue list` (aclaim_count_in below), so that jobs_org_state is not rebuilt.
CREATE INDEX jobs_waiting ON jobs (org_id, queue) WHERE state = 'waiting';

-- ---- the edges ----
-- job_id waits for depends_on. policy: what a dependency that ends other than completed does to
-- its dependent: 'cancel' it (cascading to the dependent's own dependents) or 'run' it anyway.
-- resolved: how the dependency ended (NULL while it has not), set in the transaction that ended it.
CREATE TABLE job_dependencies (
    org_id      bigint      NOT NULL CHECK (org_id > 0),
    job_id      bigint      NOT NULL,
    depends_on  bigint      NOT NULL,
    policy      text        NOT NULL DEFAULT 'cancel' CHECK (policy IN ('cancel', 'run')),
    resolved    text        CHECK (resolved IN ('completed', 'failed', 'discarded', 'cancelled')),
    resolved_at timestamptz,
    PRIMARY KEY (job_id, depends_on),
    CHECK (job_id <> depends_on),
    CHECK ((resolved IS NULL) = (resolved_at IS NULL))
);
-- The dependents of an ending job that are still waiting for it.
CREATE INDEX job_dependencies_on ON job_dependencies (depends_on) WHERE resolved IS NULL;

ALTER TABLE job_dependencies ENABLE ROW LEVEL SECURITY;
CREATE POLICY org_scope ON job_dependencies TO aclaim_coordinator
    USING (aclaim_org_visible(org_id)) WITH CHECK (aclaim_org_visible(org_id));
GRANT SELECT, INSERT, UPDATE ON job_dependencies TO aclaim_coordinator;

-- Pruning a finished job forgets the edges it waited on (a probe of the primary key per job).
-- The edges of a pruned dependency stay, resolved, until their dependent is pruned in turn: only a
-- finished job is pruned, and its ending resolved every edge to it.
CREATE FUNCTION jobs_forget_dependencies() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM job_dependencies d WHERE d.job_id IN (SELECT id FROM gone);
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_forget_dependencies AFTER DELETE ON jobs REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_forget_dependencies();

-- ---- the audit log's new kind ----
-- unblocked: the job's last dependency ended; detail says whether it is now pending or scheduled.
-- A dependent cancelled by a policy is audited 'cancelled', worker 'dependency <id>'.
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
                   'ARRAY[''unblocked''::text, ');
    EXECUTE 'ALTER TABLE job_events DROP CONSTRAINT job_events_kind_check, '
            'ADD CONSTRAINT job_events_kind_check ' || def || ' NOT VALID';
END $$;

-- ---- settling ----
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
CREATE FUNCTION aclaim_dependencies_settled(now_us bigint, ended bigint[], outcomes text[])
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

-- ---- adding edges at enqueue ----
-- Adds the edges of jobs just enqueued by aclaim_enqueue_jobs: `job_ids` the call's jobs in the
-- caller's order, `created` whether each was created (a job a dedupe key returned is left as it
-- is: its edges are those it was enqueued with), and one array element per edge: dependent
-- `edge_n` (1-based index in the call) waits for `edge_on`, a job id (> 0) or -k for job k of
-- the same call, with policy `edge_policy` (NULL: 'cancel'). Every dependency must be a job of
-- `org` (refused otherwise, naming it); a cycle among the call's jobs is refused, naming a job on
-- it (a job enqueued earlier cannot depend on one enqueued now, so no other cycle can form). Each
-- dependency's row is locked and flagged has_dependents before its state is read, so an ending
-- that commits meanwhile is seen (see aclaim_dependencies_settled). A dependent with an edge still
-- open waits; dependencies that already ended settle at once (a completed one is satisfied, a
-- failed one applies the policy).
CREATE FUNCTION aclaim_add_dependencies(org bigint, now_us bigint, job_ids bigint[],
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
             WHERE j.id = ANY(e_on) ORDER BY j.id FOR NO KEY UPDATE OF j) AS t;
    SELECT d INTO bad FROM unnest(e_on) AS d
     WHERE d <> ALL(coalesce(t_id, '{}')) ORDER BY d LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'enqueue: dependency % does not exist (or was pruned); nothing was '
                        'enqueued', bad.d
            USING ERRCODE = 'foreign_key_violation';
    END IF;
    SELECT t.id, t.org INTO bad FROM unnest(t_id, t_org) AS t(id, org)
     WHERE t.org <> aclaim_add_dependencies.org ORDER BY t.id LIMIT 1;
    IF FOUND THEN
        -- Which organization it is of is not said: a producer learns nothing of another's jobs.
        RAISE EXCEPTION 'enqueue: dependency % is not a job of organization %: a job depends '
                        'only on jobs of its own organization; nothing was enqueued', bad.id, org
            USING ERRCODE = 'insufficient_privilege';
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

-- Enqueues as aclaim_enqueue_jobs (0008) and adds the call's dependencies (aclaim_add_dependencies)
-- in the same transaction; without dependencies (all three NULL) it is that function alone. The
-- store's sql::kEnqueue and the producer API call it.
CREATE FUNCTION aclaim_enqueue_jobs(
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
    RETURN QUERY
    SELECT e.n, e.id, e.made, j.state
      FROM unnest(ns, ids, made) AS e(n, id, made) JOIN jobs j ON j.id = e.id
     ORDER BY e.n;
END $$;

-- ---- cancelling ----
-- As 0008's, with 'parked' (0023: a parked job has no live holder to tell, so only an assigned
-- one is revoked, and its token is refused 'stale' from then on) and 'waiting' among the
-- cancellable states, and the cancelled jobs that have dependents settled in the same transaction (their dependents' policies apply).
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

-- ---- counting ----
-- As 0014's, with 'parked' among the states counted through jobs_org_state (0023) and waiting jobs
-- counted from jobs_waiting.
CREATE OR REPLACE FUNCTION aclaim_next_org(after bigint) RETURNS bigint
LANGUAGE sql STABLE AS $$
SELECT min(o) FROM (
    (SELECT org_id FROM jobs
      WHERE state IN ('pending', 'scheduled', 'failed', 'discarded', 'cancelled', 'quarantined', 'parked')
        AND org_id > coalesce(after, 0) ORDER BY org_id LIMIT 1)
    UNION ALL
    (SELECT org_id FROM jobs
      WHERE state = 'assigned' AND org_id > coalesce(after, 0) ORDER BY org_id LIMIT 1)
    UNION ALL
    (SELECT org_id FROM jobs
      WHERE state IN ('completed', 'failed', 'discarded', 'cancelled')
        AND org_id > coalesce(after, 0) ORDER BY org_id LIMIT 1)
    UNION ALL
    (SELECT org_id FROM jobs
      WHERE state = 'waiting' AND org_id > coalesce(after, 0) ORDER BY org_id LIMIT 1)
) first(o)
$$;

CREATE OR REPLACE FUNCTION aclaim_next_queue(org bigint, st text, after text) RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF st = 'waiting' THEN
        RETURN (SELECT queue FROM jobs WHERE org_id = org AND state = 'waiting'
                   AND queue > coalesce(after, '') ORDER BY queue LIMIT 1);
    ELSIF st = 'assigned' THEN
        RETURN (SELECT queue FROM jobs WHERE org_id = org AND state = 'assigned'
                   AND queue > coalesce(after, '') ORDER BY queue LIMIT 1);
    ELSIF st = 'completed' THEN
        RETURN (SELECT queue FROM jobs WHERE org_id = org AND state = 'completed'
                   AND queue > coalesce(after, '') ORDER BY queue LIMIT 1);
    END IF;
    RETURN (SELECT queue FROM jobs
             WHERE org_id = org AND state = st
               AND state IN ('pending', 'scheduled', 'failed', 'discarded', 'cancelled',
                             'quarantined', 'parked')
               AND queue > coalesce(after, '') ORDER BY queue LIMIT 1);
END
$$;

CREATE OR REPLACE FUNCTION aclaim_count_in(org bigint, st text, q text, cap bigint) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
    lim bigint := CASE WHEN cap IS NULL THEN NULL ELSE cap + 1 END;
BEGIN
    IF st = 'waiting' THEN
        RETURN (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE org_id = org AND state = 'waiting'
                   AND (q IS NULL OR queue = q) LIMIT lim) c);
    ELSIF st = 'assigned' THEN
        RETURN (SELECT count(*) FROM (SELECT 1 FROM jobs WHERE org_id = org AND state = 'assigned'
                   AND (q IS NULL OR queue = q) LIMIT lim) c);
    ELSIF st = 'completed' THEN
        IF q IS NULL THEN
            RETURN (SELECT count(*) FROM (SELECT 1 FROM jobs
                     WHERE org_id = org AND state = 'completed' LIMIT lim) c);
        END IF;
        RETURN (SELECT count(*) FROM (SELECT 1 FROM jobs
                 WHERE org_id = org AND queue = q AND state = 'completed' LIMIT lim) c);
    END IF;
    IF q IS NULL THEN
        RETURN (SELECT count(*) FROM (SELECT 1 FROM jobs
                 WHERE org_id = org AND state = st
                   AND state IN ('pending', 'scheduled', 'failed', 'discarded', 'cancelled',
                                 'quarantined', 'parked') LIMIT lim) c);
    END IF;
    RETURN (SELECT count(*) FROM (SELECT 1 FROM jobs
             WHERE org_id = org AND state = st AND queue = q
               AND state IN ('pending', 'scheduled', 'failed', 'discarded', 'cancelled',
                             'quarantined', 'parked') LIMIT lim) c);
END
$$;

-- ---- the producer API ----
-- aclaim_enqueue and aclaim_enqueue_many (0008) gain trailing, defaulted dependency arguments;
-- a call that names none is what it was. Replaced rather than overloaded, so that a call with the
-- old arguments is not ambiguous.
DROP FUNCTION aclaim_enqueue(text, text, integer, bigint, text, integer, bigint, bigint, bigint,
                             bigint, bigint, bigint);
DROP FUNCTION aclaim_enqueue_many(text[], text[], integer[], bigint[], text[], integer[],
                                  bigint[], bigint[], bigint[], bigint, bigint, bigint);

-- One job; depends_on: the jobs it waits for (each of the caller's organization), on_failure:
-- 'cancel' (the default) or 'run' when one of them ends other than completed.
CREATE FUNCTION aclaim_enqueue(
    payload text, queue text DEFAULT 'default', priority integer DEFAULT 0,
    run_at_us bigint DEFAULT NULL, dedupe_key text DEFAULT NULL,
    max_attempts integer DEFAULT NULL, run_timeout_us bigint DEFAULT NULL,
    backoff_base_us bigint DEFAULT NULL, backoff_cap_us bigint DEFAULT NULL,
    dedupe_window_us bigint DEFAULT NULL, org bigint DEFAULT NULL, now_us bigint DEFAULT NULL,
    depends_on bigint[] DEFAULT NULL, on_failure text DEFAULT NULL)
    RETURNS TABLE (id bigint, created boolean, state text)
    LANGUAGE sql SECURITY DEFINER
    BEGIN ATOMIC
        SELECT e.id, e.created, e.state
          FROM aclaim_enqueue_jobs(aclaim_api_org(org),
                                   coalesce(now_us, aclaim_us(statement_timestamp())),
                                   ARRAY[queue], ARRAY[payload], ARRAY[priority], ARRAY[run_at_us],
                                   ARRAY[max_attempts], ARRAY[backoff_base_us],
                                   ARRAY[backoff_cap_us], ARRAY[run_timeout_us],
                                   ARRAY[dedupe_key], dedupe_window_us,
                                   CASE WHEN cardinality(depends_on) > 0
                                        THEN array_fill(1, ARRAY[cardinality(depends_on)]) END,
                                   CASE WHEN cardinality(depends_on) > 0 THEN depends_on END,
                                   CASE WHEN cardinality(depends_on) > 0
                                        THEN array_fill(coalesce(on_failure, 'cancel'),
                                                        ARRAY[cardinality(depends_on)]) END) AS e;
    END;

-- Many jobs, one array element each (see aclaim_enqueue_jobs), and their dependencies, one array
-- element per edge: job depends_n[i] of this call (counting from 1) waits for depends_on[i], a job
-- id, or -k for job k of this call; on_failure[i] 'cancel' (NULL, the default) or 'run'.
CREATE FUNCTION aclaim_enqueue_many(
    payloads text[], queues text[] DEFAULT NULL, priorities integer[] DEFAULT NULL,
    run_at_us bigint[] DEFAULT NULL, dedupe_keys text[] DEFAULT NULL,
    max_attempts integer[] DEFAULT NULL, run_timeout_us bigint[] DEFAULT NULL,
    backoff_base_us bigint[] DEFAULT NULL, backoff_cap_us bigint[] DEFAULT NULL,
    dedupe_window_us bigint DEFAULT NULL, org bigint DEFAULT NULL, now_us bigint DEFAULT NULL,
    depends_n integer[] DEFAULT NULL, depends_on bigint[] DEFAULT NULL,
    on_failure text[] DEFAULT NULL)
    RETURNS TABLE (n bigint, id bigint, created boolean, state text)
    LANGUAGE sql SECURITY DEFINER
    BEGIN ATOMIC
        SELECT e.n, e.id, e.created, e.state
          FROM aclaim_enqueue_jobs(aclaim_api_org(org),
                                   coalesce(now_us, aclaim_us(statement_timestamp())),
                                   queues, payloads, priorities, run_at_us, max_attempts,
                                   backoff_base_us, backoff_cap_us, run_timeout_us, dedupe_keys,
                                   dedupe_window_us, depends_n, depends_on, on_failure) AS e
         ORDER BY e.n;
    END;

DO $$
DECLARE
    f record;
BEGIN
    FOR f IN SELECT p.oid::regprocedure AS sig
               FROM pg_proc p
              WHERE p.pronamespace = current_schema()::regnamespace
                AND p.proname IN ('aclaim_enqueue', 'aclaim_enqueue_many')
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', f.sig, current_schema());
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f.sig);
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO aclaim_producer', f.sig);
    END LOOP;
END $$;

-- A producer reads its own organization's edges (a workflow's shape and progress).
GRANT SELECT ON job_dependencies TO aclaim_producer;
CREATE POLICY producer_scope ON job_dependencies FOR SELECT TO aclaim_producer
    USING (org_id = (SELECT aclaim_producer_org()));

-- ---- a parked job finished by its callback ----
-- aclaim_finish_parked (0023) ends a parked job (completed, failed, or discarded on its last
-- attempt) and then marks its park used, in one transaction. Marking it used settles the job's
-- dependents as every other ending does, in that transaction: only a park's row fires this, so
-- nothing else pays for it, and a refused callback (which marks nothing) unblocks nothing.
CREATE FUNCTION job_parks_settle_dependents() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    j record;
BEGIN
    SELECT id, state, has_dependents INTO j FROM jobs WHERE id = NEW.job_id;
    IF j.has_dependents AND j.state IN ('completed', 'failed', 'discarded') THEN
        PERFORM aclaim_dependencies_settled(aclaim_us(NEW.used_at), ARRAY[j.id], ARRAY[j.state]);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER job_parks_settle_dependents AFTER UPDATE OF used_at ON job_parks
    FOR EACH ROW WHEN (OLD.used_at IS NULL AND NEW.used_at IS NOT NULL)
    EXECUTE FUNCTION job_parks_settle_dependents();
