-- Separation of duties (four-eyes review): a job may exclude reviewers, by the name of their key
-- ("not these reviewers") or as whoever completed another job of its organization ("not whoever
-- completed jobs X and Y"), and the claim statement itself never hands it to an excluded
-- reviewer. The reviewer is the claim's assignee: under CURVE the name the authenticated key is
-- registered under (the coordinator refuses a HELLO whose worker id is any other), in plaintext
-- mode whatever name the worker chose. docs/integration.md ("Separation of duties") is the user's
-- guide, docs/guarantees.md says what is guaranteed.
--
-- What a job without exclusions pays: nothing. The claim statements run so far are unchanged;
-- only a served queue into which a job with exclusions was ever enqueued (job_queues.has_exclusions,
-- sticky) makes the coordinator run the exclusion-aware variants (common/store/store_sql.hpp,
-- exclusion_predicate). The first such enqueue into a queue takes the organization's queue lock
-- exclusive and advances aclaim_exclusions_epoch, which kClaimLocks reads after taking that lock
-- shared: a claim whose snapshot predates the flag sees the epoch move and runs the aware variant
-- (the argument is written out at kClaimLocks).

-- ---- the flag ----
-- Set, once and for good, by the first enqueue of a job with exclusions into the queue.
ALTER TABLE job_queues ADD COLUMN has_exclusions boolean NOT NULL DEFAULT false;

-- Advanced by every enqueue that sets a queue's has_exclusions, before it commits and while it
-- holds the organization's queue lock exclusive. Not transactional, so a claim reads its newest
-- value whatever its snapshot.
CREATE SEQUENCE aclaim_exclusions_epoch;

-- ---- who is connected ----
-- The names of the workers connected to a coordinator, per organization (NULL: more than its
-- publisher names, or a coordinator that predates this column), so that the console can tell
-- that a job waits because every connected reviewer is excluded from it.
ALTER TABLE coordinator_presence ADD COLUMN reviewers text[];

-- ---- the exclusions ----
-- job_id may not be handed to the reviewer excluded_key, nor, while completer_of has not ended,
-- to anyone, nor, once completer_of completed, to the reviewer who completed it (its assignee).
CREATE TABLE job_exclusions (
    org_id       bigint NOT NULL CHECK (org_id > 0),
    job_id       bigint NOT NULL,
    excluded_key text   CHECK (excluded_key <> ''),
    completer_of bigint,
    CHECK ((excluded_key IS NULL) <> (completer_of IS NULL)),
    CHECK (completer_of IS DISTINCT FROM job_id)
);
CREATE INDEX job_exclusions_job ON job_exclusions (job_id);
-- For pruning: the exclusions that name a job being removed.
CREATE INDEX job_exclusions_completer ON job_exclusions (completer_of)
    WHERE completer_of IS NOT NULL;

ALTER TABLE job_exclusions ENABLE ROW LEVEL SECURITY;
CREATE POLICY org_scope ON job_exclusions TO aclaim_coordinator
    USING (aclaim_org_visible(org_id)) WITH CHECK (aclaim_org_visible(org_id));
GRANT SELECT, INSERT ON job_exclusions TO aclaim_coordinator;
GRANT USAGE, SELECT ON SEQUENCE aclaim_exclusions_epoch TO aclaim_coordinator;
GRANT SELECT ON job_exclusions TO aclaim_producer;
CREATE POLICY producer_scope ON job_exclusions FOR SELECT TO aclaim_producer
    USING (org_id = (SELECT aclaim_producer_org()));

-- Whether `reviewer` is excluded from `job`: named, or the completer of a named job that
-- completed, or anyone while a named job has not ended (so that the reviewer who will complete
-- it cannot hold the job meanwhile). A named job that is gone was pruned, and its completer was
-- written as a named reviewer then (jobs_resolve_exclusions). The claim statements' aware
-- variants and aclaim_exclusion_slots call it; it reads the newest committed rows its statement
-- sees, and a completion that commits after the claim's snapshot was still 'assigned' in it.
CREATE FUNCTION aclaim_excluded(job bigint, reviewer text) RETURNS boolean
    LANGUAGE sql STABLE AS $$
SELECT EXISTS (
    SELECT 1 FROM job_exclusions x LEFT JOIN jobs d ON d.id = x.completer_of
     WHERE x.job_id = job
       AND (x.excluded_key = reviewer
            OR (d.id IS NOT NULL
                AND (d.state NOT IN ('completed', 'failed', 'discarded', 'cancelled')
                     OR (d.state = 'completed' AND d.assignee = reviewer)))))
$$;

-- Whether any of `reviewers` may take `job` (a job without exclusions: true).
CREATE FUNCTION aclaim_excluded_for_all(job bigint, reviewers text[]) RETURNS boolean
    LANGUAGE sql STABLE AS $$
SELECT EXISTS (SELECT 1 FROM job_exclusions x WHERE x.job_id = job)
       AND NOT EXISTS (SELECT 1 FROM (SELECT DISTINCT unnest(reviewers) AS r) AS w
                        WHERE NOT aclaim_excluded(job, w.r))
$$;

-- The coalesced claim's matching of jobs to slots when exclusions may apply: `ids` the jobs the
-- claim may take, best first, `reviewers` one assignee per slot. Jobs with exclusions are placed
-- first, the one with the fewest allowed slots first (then in the given order), each in the first
-- free slot whose reviewer it does not exclude; then the others, in the given order, in the free
-- slots in slot order. A job with exclusions that finds no free allowed slot is not placed (the
-- claim leaves it pending). Greedy, so not a maximum matching in every case, but never a placement
-- in an excluded slot.
CREATE FUNCTION aclaim_exclusion_slots(ids bigint[], reviewers text[])
    RETURNS TABLE (job bigint, slot integer) LANGUAGE plpgsql STABLE AS $$
DECLARE
    used boolean[] := array_fill(false, ARRAY[cardinality(reviewers)]);
    next_free integer := 1;
    r record;
    s integer;
BEGIN
    FOR r IN
        SELECT c.id, c.ok FROM (
            SELECT e.id, e.k, ARRAY(SELECT g.s FROM generate_subscripts(reviewers, 1) AS g(s)
                                     WHERE NOT aclaim_excluded(e.id, reviewers[g.s])
                                     ORDER BY g.s) AS ok
              FROM unnest(ids) WITH ORDINALITY AS e(id, k)
             WHERE EXISTS (SELECT 1 FROM job_exclusions x WHERE x.job_id = e.id)) AS c
         ORDER BY cardinality(c.ok), c.k
    LOOP
        FOREACH s IN ARRAY r.ok LOOP
            IF NOT used[s] THEN
                used[s] := true;
                job := r.id;
                slot := s;
                RETURN NEXT;
                EXIT;
            END IF;
        END LOOP;
    END LOOP;
    FOR r IN
        SELECT e.id FROM unnest(ids) WITH ORDINALITY AS e(id, k)
         WHERE NOT EXISTS (SELECT 1 FROM job_exclusions x WHERE x.job_id = e.id)
         ORDER BY e.k
    LOOP
        WHILE next_free <= cardinality(reviewers) AND used[next_free] LOOP
            next_free := next_free + 1;
        END LOOP;
        EXIT WHEN next_free > cardinality(reviewers);
        used[next_free] := true;
        job := r.id;
        slot := next_free;
        RETURN NEXT;
    END LOOP;
END $$;

-- ---- pruning ----
-- A pruned job takes its own exclusions with it; an exclusion that names a pruned job that
-- completed becomes one that names its completer, so that it still excludes them. Once per
-- statement over the removed rows, as jobs_forget_dependencies (0024).
CREATE FUNCTION jobs_resolve_exclusions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO job_exclusions (org_id, job_id, excluded_key)
    SELECT x.org_id, x.job_id, g.assignee
      FROM job_exclusions x JOIN gone g ON g.id = x.completer_of
     WHERE g.state = 'completed' AND x.job_id NOT IN (SELECT id FROM gone);
    DELETE FROM job_exclusions x
     WHERE x.job_id IN (SELECT id FROM gone) OR x.completer_of IN (SELECT id FROM gone);
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_resolve_exclusions AFTER DELETE ON jobs REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_resolve_exclusions();

-- ---- adding exclusions at enqueue ----
-- Before the enqueue: the queues of `queues` that jobs with exclusions go into and that do not
-- have the flag yet get it, under the organization's queue lock taken exclusive first (before any
-- row of the call is locked, so that no claim holding the lock shared waits on a row of ours),
-- and the epoch moves on.
CREATE FUNCTION aclaim_flag_exclusions(org bigint, now_us bigint, queues text[], excl_n integer[])
    RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    flip text[];
BEGIN
    SELECT array_agg(DISTINCT q.queue ORDER BY q.queue) INTO flip
      FROM (SELECT coalesce(queues[n], 'default') AS queue FROM unnest(excl_n) AS n
             WHERE n BETWEEN 1 AND cardinality(queues)) AS q
     WHERE NOT EXISTS (SELECT 1 FROM job_queues jq
                        WHERE jq.org_id = org AND jq.queue = q.queue AND jq.has_exclusions);
    IF flip IS NULL THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(aclaim_org_lock(org));
    PERFORM nextval('aclaim_exclusions_epoch');
    INSERT INTO job_queues (org_id, queue, updated_at, has_exclusions)
    SELECT org, f, aclaim_ts(now_us), true FROM unnest(flip) AS f
    ON CONFLICT (org_id, queue) DO UPDATE SET has_exclusions = true;
END $$;

-- After the enqueue: the exclusions of the call's jobs, one array element each: job excl_n[i]
-- (1-based index in the call) excludes the reviewer excl_key[i], or whoever completes
-- excl_job[i] (a job id, or -k for job k of this call); exactly one of the two. Only created jobs
-- get them (a job a dedupe key returned keeps those it was enqueued with). Every named job must
-- be a job of `org` (refused otherwise, naming it).
CREATE FUNCTION aclaim_add_exclusions(org bigint, job_ids bigint[], created boolean[],
                                      excl_n integer[], excl_key text[], excl_job bigint[])
    RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    bad record;
BEGIN
    IF cardinality(excl_n) IS DISTINCT FROM cardinality(excl_key)
       OR cardinality(excl_n) IS DISTINCT FROM cardinality(excl_job) THEN
        RAISE EXCEPTION 'enqueue: exclusions must be given as jobs, reviewers and named jobs of '
                        'one length (% jobs, % reviewers, % named jobs)', cardinality(excl_n),
                        cardinality(excl_key), cardinality(excl_job)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT e.k, e.n, e.key, e.on_ INTO bad
      FROM unnest(excl_n, excl_key, excl_job) WITH ORDINALITY AS e(n, key, on_, k)
     WHERE e.n IS NULL OR e.n NOT BETWEEN 1 AND cardinality(job_ids)
        OR (e.key IS NULL) = (e.on_ IS NULL) OR e.key = '' OR e.on_ = 0
        OR -e.on_ > cardinality(job_ids) OR e.on_ = -e.n
     ORDER BY e.k LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'enqueue: exclusion % of this call (job % excludes reviewer % / the '
                        'completer of %) is invalid: the job is a job of this call (1 to %), and '
                        'exactly one of a reviewer name and a job (an id, or -k for job k of this '
                        'call, not the job itself) is given; nothing was enqueued', bad.k, bad.n,
                        coalesce(bad.key, '-'), coalesce(bad.on_::text, '-'), cardinality(job_ids)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT x.on_ INTO bad
      FROM unnest(excl_job) AS x(on_)
     WHERE x.on_ > 0 AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = x.on_ AND j.org_id = org)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'enqueue: job % named by an exclusion is not a job of this organization; '
                        'nothing was enqueued', bad.on_
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO job_exclusions (org_id, job_id, excluded_key, completer_of)
    SELECT DISTINCT org, job_ids[e.n], e.key,
           CASE WHEN e.on_ > 0 THEN e.on_ ELSE job_ids[-e.on_] END
      FROM unnest(excl_n, excl_key, excl_job) AS e(n, key, on_)
     WHERE coalesce(created[e.n], false)
       AND job_ids[e.n] IS DISTINCT FROM CASE WHEN e.on_ > 0 THEN e.on_ ELSE job_ids[-e.on_] END;
END $$;

-- Enqueues as aclaim_enqueue_jobs (0024) and adds the call's exclusions in the same transaction.
-- An overload: the store calls it (sql::kEnqueueExcluding) only for a call with exclusions, so an
-- enqueue without any runs exactly as before.
CREATE FUNCTION aclaim_enqueue_jobs(
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

-- ---- the producer API ----
-- aclaim_enqueue and aclaim_enqueue_many (0024) gain trailing, defaulted exclusion arguments; a
-- call that names none is what it was. Replaced rather than overloaded, as 0024 did.
DROP FUNCTION aclaim_enqueue(text, text, integer, bigint, text, integer, bigint, bigint, bigint,
                             bigint, bigint, bigint, bigint[], text);
DROP FUNCTION aclaim_enqueue_many(text[], text[], integer[], bigint[], text[], integer[],
                                  bigint[], bigint[], bigint[], bigint, bigint, bigint, integer[],
                                  bigint[], text[]);

-- Many jobs, one array element each (see aclaim_enqueue_jobs), their dependencies (0024), and
-- their exclusions, one array element each: job exclude_n[i] of this call (counting from 1) may
-- not go to the reviewer exclude_keys[i], or to whoever completes exclude_jobs[i] (a job id, or -k
-- for job k of this call); exactly one of the two per element. A call without exclusions runs
-- 0024's statement alone (the other branch's one-time filter is false).
CREATE FUNCTION aclaim_enqueue_many(
    payloads text[], queues text[] DEFAULT NULL, priorities integer[] DEFAULT NULL,
    run_at_us bigint[] DEFAULT NULL, dedupe_keys text[] DEFAULT NULL,
    max_attempts integer[] DEFAULT NULL, run_timeout_us bigint[] DEFAULT NULL,
    backoff_base_us bigint[] DEFAULT NULL, backoff_cap_us bigint[] DEFAULT NULL,
    dedupe_window_us bigint DEFAULT NULL, org bigint DEFAULT NULL, now_us bigint DEFAULT NULL,
    depends_n integer[] DEFAULT NULL, depends_on bigint[] DEFAULT NULL,
    on_failure text[] DEFAULT NULL, exclude_n integer[] DEFAULT NULL,
    exclude_keys text[] DEFAULT NULL, exclude_jobs bigint[] DEFAULT NULL)
    RETURNS TABLE (n bigint, id bigint, created boolean, state text)
    LANGUAGE sql SECURITY DEFINER
    BEGIN ATOMIC
        SELECT e.n, e.id, e.created, e.state FROM (
            SELECT p.n, p.id, p.created, p.state
              FROM aclaim_enqueue_jobs(aclaim_api_org(org),
                                       coalesce(now_us, aclaim_us(statement_timestamp())),
                                       queues, payloads, priorities, run_at_us, max_attempts,
                                       backoff_base_us, backoff_cap_us, run_timeout_us,
                                       dedupe_keys, dedupe_window_us, depends_n, depends_on,
                                       on_failure) AS p
             WHERE exclude_n IS NULL
            UNION ALL
            SELECT x.n, x.id, x.created, x.state
              FROM aclaim_enqueue_jobs(aclaim_api_org(org),
                                       coalesce(now_us, aclaim_us(statement_timestamp())),
                                       queues, payloads, priorities, run_at_us, max_attempts,
                                       backoff_base_us, backoff_cap_us, run_timeout_us,
                                       dedupe_keys, dedupe_window_us, depends_n, depends_on,
                                       on_failure, exclude_n,
                                       coalesce(exclude_keys, array_fill(NULL::text,
                                                ARRAY[cardinality(exclude_n)])),
                                       coalesce(exclude_jobs, array_fill(NULL::bigint,
                                                ARRAY[cardinality(exclude_n)]))) AS x
             WHERE exclude_n IS NOT NULL) AS e
         ORDER BY e.n;
    END;

-- One job; exclude_keys: the reviewers (key names) it may not go to; exclude_completers_of: the
-- jobs whose completer it may not go to (each of the caller's organization). A call without
-- either runs 0024's statement alone (the other branch's one-time filter is false).
CREATE FUNCTION aclaim_enqueue(
    payload text, queue text DEFAULT 'default', priority integer DEFAULT 0,
    run_at_us bigint DEFAULT NULL, dedupe_key text DEFAULT NULL,
    max_attempts integer DEFAULT NULL, run_timeout_us bigint DEFAULT NULL,
    backoff_base_us bigint DEFAULT NULL, backoff_cap_us bigint DEFAULT NULL,
    dedupe_window_us bigint DEFAULT NULL, org bigint DEFAULT NULL, now_us bigint DEFAULT NULL,
    depends_on bigint[] DEFAULT NULL, on_failure text DEFAULT NULL,
    exclude_keys text[] DEFAULT NULL, exclude_completers_of bigint[] DEFAULT NULL)
    RETURNS TABLE (id bigint, created boolean, state text)
    LANGUAGE sql SECURITY DEFINER
    BEGIN ATOMIC
        SELECT e.id, e.created, e.state
          FROM aclaim_enqueue_many(ARRAY[payload], ARRAY[queue], ARRAY[priority], ARRAY[run_at_us],
                                   ARRAY[dedupe_key], ARRAY[max_attempts], ARRAY[run_timeout_us],
                                   ARRAY[backoff_base_us], ARRAY[backoff_cap_us], dedupe_window_us,
                                   org, now_us,
                                   CASE WHEN cardinality(depends_on) > 0
                                        THEN array_fill(1, ARRAY[cardinality(depends_on)]) END,
                                   CASE WHEN cardinality(depends_on) > 0 THEN depends_on END,
                                   CASE WHEN cardinality(depends_on) > 0
                                        THEN array_fill(coalesce(on_failure, 'cancel'),
                                                        ARRAY[cardinality(depends_on)]) END,
                                   CASE WHEN cardinality(exclude_keys) > 0
                                             OR cardinality(exclude_completers_of) > 0
                                        THEN array_fill(1, ARRAY[coalesce(cardinality(exclude_keys), 0)
                                                     + coalesce(cardinality(exclude_completers_of), 0)]) END,
                                   CASE WHEN cardinality(exclude_keys) > 0
                                             OR cardinality(exclude_completers_of) > 0
                                        THEN coalesce(exclude_keys, '{}')
                                             || array_fill(NULL::text, ARRAY[coalesce(cardinality(exclude_completers_of), 0)]) END,
                                   CASE WHEN cardinality(exclude_keys) > 0
                                             OR cardinality(exclude_completers_of) > 0
                                        THEN array_fill(NULL::bigint, ARRAY[coalesce(cardinality(exclude_keys), 0)])
                                             || coalesce(exclude_completers_of, '{}') END) AS e;
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
