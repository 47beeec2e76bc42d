-- The integration surface: producers enqueue, cancel and read status from their own transactions,
-- and every terminal outcome is delivered to named consumer groups, at least once until a group
-- acknowledges it and never again after. docs/integration.md is the user's guide; docs/security.md
-- the threat model of producer logins.

-- ---- the payload limit, on every enqueue path ----
-- ASSIGNED carries a job's payload in one frame of at most 1 MiB (docs/protocol.md), and the JSON
-- encoding may write a byte as six. 128 KiB keeps every single job deliverable in either encoding;
-- a larger document belongs elsewhere, with a reference to it in the payload.
CREATE FUNCTION aclaim_max_payload_bytes() RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN 131072;

-- Enqueues many jobs: one array element per job, each through aclaim_enqueue_job (0005), which
-- returns the existing job for a dedupe key that is still held. `payloads` decides the number of
-- jobs; every other array is NULL (the default for every job) or of the same length, and a NULL
-- element takes the default (the queue's setting, then the built-in one). Jobs without a key go
-- first, in order; keyed ones after, in key order: an insert waits for another transaction's
-- uncommitted holder of its key, and producers that take keys in one order never wait on each
-- other in a cycle. Rows come back in the caller's order, n counting from 1. Runs as the caller:
-- row-level security applies. The store's sql::kEnqueue and the producer API both call it.
CREATE FUNCTION aclaim_enqueue_jobs(
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

-- Cancels each listed job that is pending, scheduled or assigned (of organization `org`, or of any
-- when it is NULL), in id order: terminal at once, audited with who and why. An assigned job keeps
-- its holder in the row, and the holder's coordinator is told on aclaim_revoke (delivered at
-- commit) so that it pushes REVOKED "cancelled" at once; the holder's completion is refused
-- "cancelled" from then on. Runs as the caller. The operator's sql::kOperatorCancel and the
-- producer API both call it.
CREATE FUNCTION aclaim_cancel_jobs(org bigint, job_ids bigint[], actor text, reason text,
                                   now_us bigint)
    RETURNS TABLE (id bigint, org_id bigint, generation bigint, was text, holder text)
    LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    c record;
BEGIN
    FOR c IN
        WITH picked AS MATERIALIZED (
            SELECT j.id, j.state AS was, j.assignee AS holder FROM jobs j
             WHERE j.id = ANY(job_ids) AND (org IS NULL OR j.org_id = org)
               AND j.state IN ('pending', 'scheduled', 'assigned')
             ORDER BY j.id FOR UPDATE
        ), done AS (
            UPDATE jobs j
               SET state = 'cancelled', completed_at = aclaim_ts(now_us), lease_expires_at = NULL,
                   last_error = 'cancelled by ' || actor || ': ' || reason
              FROM picked
             WHERE j.id = picked.id
            RETURNING j.id, j.org_id, j.generation, j.queue, j.attempts, j.last_error,
                      j.dedupe_key, j.completed_at, picked.was, picked.holder
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
        SELECT d.id, d.org_id, d.generation, d.was, d.holder FROM done d ORDER BY d.id
    LOOP
        IF c.was = 'assigned' THEN
            PERFORM pg_notify('aclaim_revoke', c.org_id || ':' || c.id || ':' || c.generation
                                               || ':cancelled:' || c.holder);
        END IF;
        id := c.id;
        org_id := c.org_id;
        generation := c.generation;
        was := c.was;
        holder := coalesce(c.holder, '');
        RETURN NEXT;
    END LOOP;
END $$;

-- ---- outcomes: every terminal transition, recorded in its own transaction ----
-- id is assigned at insert, before commit, so transactions commit out of id order: id is never a
-- cursor. `seq` is the position in the organization's delivery order, given after commit by
-- aclaim_results_sequence() (below) under a lock, in a transaction that sees every outcome
-- committed before it: positions of an organization are dense, and a reader never sees position
-- p + 1 without p. A job has one outcome per time it ended (a job revived with `aclaimctl retry`
-- ends again).
CREATE TABLE job_outcomes (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id     bigint      NOT NULL,
    job_id     bigint      NOT NULL,
    seq        bigint      CHECK (seq > 0),
    outcome    text        NOT NULL CHECK (outcome IN ('completed', 'failed', 'discarded',
                                                       'cancelled')),
    queue      text        NOT NULL,
    generation bigint      NOT NULL,
    attempts   integer     NOT NULL,
    result_ref text,
    error      text,
    dedupe_key text,
    at         timestamptz NOT NULL,
    CONSTRAINT completed_has_result CHECK ((outcome = 'completed') = (result_ref IS NOT NULL))
) WITH (fillfactor = 90);
CREATE UNIQUE INDEX job_outcomes_seq ON job_outcomes (org_id, seq)
    WHERE seq IS NOT NULL;
-- What the sequencer gives positions to next: small, as it is emptied at every fetch.
CREATE INDEX job_outcomes_unsequenced ON job_outcomes (id) INCLUDE (org_id)
    WHERE seq IS NULL;
CREATE INDEX job_outcomes_job ON job_outcomes (job_id);

-- Every statement that can end a job (sql::kComplete, kCompleteBatch, kFail, kReclaim and the
-- recovery tool's kReclaimOne, kOperatorFail, kFailQuarantined, and aclaim_cancel_jobs below)
-- inserts the outcome of each row it ended, in the same statement, with sql::record_outcomes
-- (common/store/store_sql.hpp); a unit test holds every statement that sets a terminal state to it.
-- A statement rather than a trigger: a row trigger doubled the cost of a completion's UPDATE
-- (measured +90 us a row against +25 us for the insert in the statement; a statement trigger with
-- transition tables cannot be limited to `UPDATE OF state` and taxed every renewal). The insert
-- also notifies aclaim_outcomes with the organization only: a consumer treats a notification as
-- "look again", never as the outcome itself, so notifications merged into one (PostgreSQL
-- delivers one per payload per transaction) lose nothing.

-- ---- consumer groups ----
-- A group belongs to one organization and holds a durable cursor: every position up to `acked`
-- is acknowledged, so fetch never returns it again; every later one is returned until it is.
CREATE TABLE result_groups (
    org_id     bigint      NOT NULL CHECK (org_id > 0),
    name       text        NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$'),
    acked      bigint      NOT NULL DEFAULT 0 CHECK (acked >= 0),
    created_at timestamptz NOT NULL,
    acked_at   timestamptz,
    PRIMARY KEY (org_id, name)
);

-- The last position given in each organization.
CREATE TABLE result_heads (
    org_id   bigint PRIMARY KEY,
    last_seq bigint NOT NULL CHECK (last_seq >= 0)
);

-- Gives positions to committed outcomes that have none, oldest first, at most max_rows, and returns
-- how many. The advisory lock is held to the end of the transaction, so sequencing transactions
-- commit one after another, and each one's UPDATE, a statement begun after the lock was granted,
-- sees every outcome committed before it, including those the previous holder sequenced. An
-- outcome whose transaction is still open is invisible here and gets a later position when it
-- commits: that is how no reader ever skips it. The wait for the lock is bounded (lock_timeout),
-- so a transaction that sequenced and stays open delays delivery but never blocks a fetch.
-- SECURITY DEFINER: it writes positions in every organization and discloses nothing.
CREATE FUNCTION aclaim_results_sequence(max_rows integer DEFAULT 10000) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET lock_timeout = '1s' AS $$
DECLARE
    given integer;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM job_outcomes WHERE seq IS NULL) THEN
        RETURN 0;
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'outcomes are given positions in READ COMMITTED transactions only '
                        '(this one is %)', current_setting('transaction_isolation')
            USING ERRCODE = 'invalid_transaction_state';
    END IF;
    BEGIN
        PERFORM pg_advisory_xact_lock(hashtextextended('aclaim results sequencer', 0));
    EXCEPTION WHEN lock_not_available THEN
        RETURN 0;  -- another sequencer holds it; what it commits is read at the next fetch
    END;
    WITH todo AS MATERIALIZED (
        SELECT s.id, s.org_id,
               row_number() OVER (PARTITION BY s.org_id ORDER BY s.id) AS k,
               count(*) OVER (PARTITION BY s.org_id) AS n
          FROM (SELECT id, org_id FROM job_outcomes WHERE seq IS NULL
                 ORDER BY id LIMIT max_rows) AS s
    ), heads AS (
        INSERT INTO result_heads AS h (org_id, last_seq)
        SELECT org_id, max(n) FROM todo GROUP BY org_id
        ON CONFLICT (org_id) DO UPDATE SET last_seq = h.last_seq + EXCLUDED.last_seq
        RETURNING h.org_id, h.last_seq
    )
    UPDATE job_outcomes o SET seq = heads.last_seq - todo.n + todo.k
      FROM todo JOIN heads USING (org_id)
     WHERE o.id = todo.id;
    GET DIAGNOSTICS given = ROW_COUNT;
    RETURN given;
END $$;

-- True while some consumer group of the job's organization has not acknowledged one of the job's
-- outcomes (an outcome without a position yet counts as unacknowledged). Pruning must keep such a
-- job and its outcomes.
CREATE FUNCTION aclaim_outcome_unacknowledged(job bigint) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN EXISTS (SELECT 1 FROM job_outcomes o JOIN result_groups g ON g.org_id = o.org_id
                    WHERE o.job_id = job AND (o.seq IS NULL OR o.seq > g.acked));

-- ---- producer logins ----
-- A producer is a login role bound to exactly one organization in this database. The binding is
-- keyed on session_user, the role PostgreSQL authenticated at connect: SET ROLE and settings do not
-- change it. Members of aclaim_producer get no write privilege on any table: they enqueue, cancel,
-- read status and consume outcomes through the SECURITY DEFINER functions below, which take the
-- organization from the binding, and they read their organization's rows through row-level
-- security policies keyed on the same binding.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'aclaim_producer') THEN
        CREATE ROLE aclaim_producer NOLOGIN NOSUPERUSER NOBYPASSRLS;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;  -- another database's migration created it at the same moment
END $$;

CREATE TABLE producer_logins (
    login    name        PRIMARY KEY,
    org_id   bigint      NOT NULL CHECK (org_id > 0),
    bound_at timestamptz NOT NULL,
    bound_by text        NOT NULL
);

-- The organization the session's login is bound to, or NULL.
CREATE FUNCTION aclaim_producer_org() RETURNS bigint
    LANGUAGE sql STABLE SECURITY DEFINER
    RETURN (SELECT org_id FROM producer_logins WHERE login = session_user);

-- The organization an API call acts in. A bound login acts in its own organization only (naming
-- another is refused); a member of aclaim_producer that is not bound is refused; any other caller
-- with EXECUTE (the schema's owner, or a role the owner trusted with a grant) names it, or, where
-- `all_allowed`, passes NULL for every organization.
CREATE FUNCTION aclaim_api_org(org bigint, all_allowed boolean DEFAULT false) RETURNS bigint
    LANGUAGE plpgsql STABLE AS $$
DECLARE
    bound bigint := aclaim_producer_org();
BEGIN
    IF bound IS NOT NULL THEN
        IF org IS NOT NULL AND org <> bound THEN
            RAISE EXCEPTION 'login % acts for organization % only, not for %', session_user,
                bound, org USING ERRCODE = 'insufficient_privilege';
        END IF;
        RETURN bound;
    END IF;
    IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = session_user)
       AND pg_has_role(session_user, 'aclaim_producer', 'MEMBER') THEN
        RAISE EXCEPTION 'login % is a producer not bound to an organization in this database',
            session_user USING ERRCODE = 'insufficient_privilege',
            HINT = 'aclaimctl producers bind --login <login> --org <organization>';
    END IF;
    IF org IS NULL AND NOT all_allowed THEN
        RAISE EXCEPTION 'name the organization (org => N): login % is not bound to one',
            session_user USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF org <= 0 THEN
        RAISE EXCEPTION 'organization % is not a positive id', org
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN org;
END $$;

-- Binds a login to an organization (run by the schema's owner: `aclaimctl producers bind`). A
-- login that row-level security does not apply to, or that can act as the coordinator, is refused:
-- the binding would confine nothing.
CREATE FUNCTION aclaim_producer_bind(login_name name, org bigint, actor text, now_us bigint)
    RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    r pg_roles%ROWTYPE;
BEGIN
    SELECT * INTO r FROM pg_roles WHERE rolname = login_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no role %: create the login first (CREATE ROLE % LOGIN PASSWORD ...)',
            login_name, login_name USING ERRCODE = 'undefined_object';
    END IF;
    IF r.rolsuper OR r.rolbypassrls THEN
        RAISE EXCEPTION 'login % is a superuser or bypasses row-level security: it cannot be '
                        'confined to an organization', login_name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF pg_has_role(login_name, 'aclaim_coordinator', 'MEMBER')
       OR EXISTS (SELECT 1 FROM pg_tables WHERE tablename = 'jobs' AND schemaname = current_schema()
                     AND pg_has_role(login_name, tableowner, 'MEMBER')) THEN
        RAISE EXCEPTION 'login % can act as the coordinator or owns the tables: use a login of its '
                        'own for the producer', login_name USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF org IS NULL OR org <= 0 THEN
        RAISE EXCEPTION 'organization % is not a positive id', org
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    EXECUTE format('GRANT aclaim_producer TO %I', login_name);
    INSERT INTO producer_logins (login, org_id, bound_at, bound_by)
    VALUES (login_name, org, aclaim_ts(now_us), actor)
    ON CONFLICT (login) DO UPDATE SET org_id = EXCLUDED.org_id, bound_at = EXCLUDED.bound_at,
                                      bound_by = EXCLUDED.bound_by;
END $$;

-- Removes a login's binding and its membership of aclaim_producer; true when it was bound.
CREATE FUNCTION aclaim_producer_unbind(login_name name) RETURNS boolean
    LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM producer_logins WHERE login = login_name;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = login_name) THEN
        EXECUTE format('REVOKE aclaim_producer FROM %I', login_name);
    END IF;
    RETURN true;
END $$;

-- ---- the producer API: called inside the producer's own transaction ----
-- Each takes the organization from the login (aclaim_api_org), and time from now_us, the
-- producer's clock in microseconds since the epoch; a caller that passes none gets the database's
-- statement time. What a producer enqueues exists only if its transaction commits, and the
-- coordinators' wake-up (aclaim_wake, a NOTIFY) is delivered only then.

-- One job. Every argument may be named: SELECT * FROM aclaim_enqueue(queue => 'electrical',
-- payload => '...', dedupe_key => 'order-77').
CREATE FUNCTION aclaim_enqueue(
    payload text, queue text DEFAULT 'default', priority integer DEFAULT 0,
    run_at_us bigint DEFAULT NULL, dedupe_key text DEFAULT NULL,
    max_attempts integer DEFAULT NULL, run_timeout_us bigint DEFAULT NULL,
    backoff_base_us bigint DEFAULT NULL, backoff_cap_us bigint DEFAULT NULL,
    dedupe_window_us bigint DEFAULT NULL, org bigint DEFAULT NULL, now_us bigint DEFAULT NULL)
    RETURNS TABLE (id bigint, created boolean, state text)
    LANGUAGE sql SECURITY DEFINER
    BEGIN ATOMIC
        SELECT e.id, e.created, e.state
          FROM aclaim_enqueue_jobs(aclaim_api_org(org),
                                   coalesce(now_us, aclaim_us(statement_timestamp())),
                                   ARRAY[queue], ARRAY[payload], ARRAY[priority], ARRAY[run_at_us],
                                   ARRAY[max_attempts], ARRAY[backoff_base_us],
                                   ARRAY[backoff_cap_us], ARRAY[run_timeout_us],
                                   ARRAY[dedupe_key], dedupe_window_us) AS e;
    END;

-- Many jobs, one array element each (see aclaim_enqueue_jobs); rows in the caller's order.
CREATE FUNCTION aclaim_enqueue_many(
    payloads text[], queues text[] DEFAULT NULL, priorities integer[] DEFAULT NULL,
    run_at_us bigint[] DEFAULT NULL, dedupe_keys text[] DEFAULT NULL,
    max_attempts integer[] DEFAULT NULL, run_timeout_us bigint[] DEFAULT NULL,
    backoff_base_us bigint[] DEFAULT NULL, backoff_cap_us bigint[] DEFAULT NULL,
    dedupe_window_us bigint DEFAULT NULL, org bigint DEFAULT NULL, now_us bigint DEFAULT NULL)
    RETURNS TABLE (n bigint, id bigint, created boolean, state text)
    LANGUAGE sql SECURITY DEFINER
    BEGIN ATOMIC
        SELECT e.n, e.id, e.created, e.state
          FROM aclaim_enqueue_jobs(aclaim_api_org(org),
                                   coalesce(now_us, aclaim_us(statement_timestamp())),
                                   queues, payloads, priorities, run_at_us, max_attempts,
                                   backoff_base_us, backoff_cap_us, run_timeout_us, dedupe_keys,
                                   dedupe_window_us) AS e
         ORDER BY e.n;
    END;

-- Cancels the caller's organization's listed jobs that are pending, scheduled or assigned (see
-- aclaim_cancel_jobs); the others (finished, or another organization's) are left alone and not
-- returned. Audited as cancelled by "producer <login>".
CREATE FUNCTION aclaim_cancel(job_ids bigint[], reason text, org bigint DEFAULT NULL,
                              now_us bigint DEFAULT NULL)
    RETURNS TABLE (id bigint, was text)
    LANGUAGE plpgsql SECURITY DEFINER AS $$
#variable_conflict use_column
DECLARE
    o bigint := aclaim_api_org(org);
BEGIN
    IF reason IS NULL OR btrim(reason) = '' THEN
        RAISE EXCEPTION 'cancel: say why (reason => ...); it is recorded in job_events'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT c.id, c.was
      FROM aclaim_cancel_jobs(o, job_ids, 'producer ' || session_user, reason,
                              coalesce(now_us, aclaim_us(statement_timestamp()))) AS c;
END $$;

-- The status of the caller's organization's jobs, named by id or by dedupe key (either may be
-- NULL); unknown and foreign ones are not returned. Times in microseconds since the epoch.
CREATE FUNCTION aclaim_job_status(job_ids bigint[] DEFAULT NULL, dedupe_keys text[] DEFAULT NULL,
                                  org bigint DEFAULT NULL)
    RETURNS TABLE (id bigint, queue text, state text, priority integer, attempts integer,
                   max_attempts integer, dedupe_key text, enqueued_us bigint, run_at_us bigint,
                   finished_us bigint, result_ref text, last_error text)
    LANGUAGE plpgsql STABLE SECURITY DEFINER AS $$
#variable_conflict use_column
DECLARE
    o bigint := aclaim_api_org(org);
BEGIN
    RETURN QUERY
    SELECT j.id, j.queue, j.state, j.priority, j.attempts, j.max_attempts, j.dedupe_key,
           aclaim_us(j.enqueued_at), aclaim_us(j.run_at), aclaim_us(j.completed_at),
           j.result_ref, j.last_error
      FROM jobs j
     WHERE j.org_id = o AND (j.id = ANY(job_ids) OR j.dedupe_key = ANY(dedupe_keys))
     ORDER BY j.id;
END $$;

-- ---- the consumer API ----

-- Creates a consumer group of the caller's organization, or returns the existing one unchanged.
-- start_at 'latest': the group receives outcomes committed from now on (and any still being
-- committed); 'earliest': every outcome still kept.
CREATE FUNCTION aclaim_results_group_create(group_name text, start_at text DEFAULT 'latest',
                                            org bigint DEFAULT NULL, now_us bigint DEFAULT NULL)
    RETURNS TABLE (org_id bigint, acked bigint, created boolean)
    LANGUAGE plpgsql SECURITY DEFINER AS $$
#variable_conflict use_column
DECLARE
    o bigint := aclaim_api_org(org);
    first_cursor bigint;
    inserted integer;
BEGIN
    IF start_at NOT IN ('latest', 'earliest') THEN
        RAISE EXCEPTION 'start_at is ''latest'' or ''earliest'', not %', quote_literal(start_at)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    org_id := o;
    SELECT g.acked INTO first_cursor FROM result_groups g
     WHERE g.org_id = o AND g.name = group_name;
    IF FOUND THEN
        acked := first_cursor;
        created := false;
        RETURN NEXT;
        RETURN;
    END IF;
    PERFORM aclaim_results_sequence();
    IF start_at = 'latest' THEN
        first_cursor := coalesce((SELECT h.last_seq FROM result_heads h WHERE h.org_id = o), 0);
    ELSE
        first_cursor := coalesce((SELECT min(x.seq) - 1 FROM job_outcomes x
                                   WHERE x.org_id = o AND x.seq IS NOT NULL), 0);
    END IF;
    INSERT INTO result_groups AS g (org_id, name, acked, created_at)
    VALUES (o, group_name, first_cursor,
            aclaim_ts(coalesce(now_us, aclaim_us(statement_timestamp()))))
    ON CONFLICT (org_id, name) DO NOTHING;
    GET DIAGNOSTICS inserted = ROW_COUNT;
    created := inserted > 0;
    SELECT g.acked INTO acked FROM result_groups g WHERE g.org_id = o AND g.name = group_name;
    RETURN NEXT;
END $$;

CREATE FUNCTION aclaim_results_group_drop(group_name text, org bigint DEFAULT NULL)
    RETURNS boolean LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    DELETE FROM result_groups g WHERE g.org_id = aclaim_api_org(org) AND g.name = group_name;
    RETURN FOUND;
END $$;

-- The consumer groups of the caller's organization (a trusted caller passing NULL: of every
-- organization) with how far each is behind: positions given and not acknowledged, plus outcomes
-- committed and not yet given a position.
CREATE FUNCTION aclaim_results_groups(org bigint DEFAULT NULL)
    RETURNS TABLE (org_id bigint, name text, acked bigint, head bigint, lag bigint,
                   created_us bigint, acked_us bigint)
    LANGUAGE plpgsql STABLE SECURITY DEFINER AS $$
#variable_conflict use_column
DECLARE
    o bigint := aclaim_api_org(org, true);
BEGIN
    RETURN QUERY
    SELECT g.org_id, g.name, g.acked, coalesce(h.last_seq, 0),
           greatest(coalesce(h.last_seq, 0) - g.acked, 0) + coalesce(u.n, 0),
           aclaim_us(g.created_at), aclaim_us(g.acked_at)
      FROM result_groups g
      LEFT JOIN result_heads h ON h.org_id = g.org_id
      LEFT JOIN (SELECT x.org_id, count(*) AS n FROM job_outcomes x WHERE x.seq IS NULL
                  GROUP BY x.org_id) AS u ON u.org_id = g.org_id
     WHERE o IS NULL OR g.org_id = o
     ORDER BY g.org_id, g.name;
END $$;

-- Up to max_rows outcomes the group has not acknowledged, in position order, after giving
-- positions to newly committed ones. The same outcomes come back at every fetch until they are
-- acknowledged. Run it in a transaction of its own (autocommit) or keep the transaction short:
-- the positions it gave are seen by other consumers once it commits.
CREATE FUNCTION aclaim_results_fetch(group_name text, max_rows integer DEFAULT 100,
                                     org bigint DEFAULT NULL)
    RETURNS TABLE (seq bigint, job_id bigint, outcome text, queue text, generation bigint,
                   attempts integer, result_ref text, error text, dedupe_key text, at_us bigint)
    LANGUAGE plpgsql SECURITY DEFINER AS $$
#variable_conflict use_column
DECLARE
    o bigint := aclaim_api_org(org);
    cursor_at bigint;
BEGIN
    IF max_rows IS NULL OR max_rows NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'fetch: max_rows is 1 to 10000, not %', max_rows
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT g.acked INTO cursor_at FROM result_groups g WHERE g.org_id = o AND g.name = group_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'organization % has no consumer group %', o, quote_literal(group_name)
            USING ERRCODE = 'undefined_object',
                  HINT = 'Create it with aclaim_results_group_create or aclaimctl results group add.';
    END IF;
    PERFORM aclaim_results_sequence();
    RETURN QUERY
    SELECT x.seq, x.job_id, x.outcome, x.queue, x.generation, x.attempts, x.result_ref,
           x.error, x.dedupe_key, aclaim_us(x.at)
      FROM job_outcomes x
     WHERE x.org_id = o AND x.seq > cursor_at
     ORDER BY x.seq
     LIMIT max_rows;
END $$;

-- Acknowledges every outcome of the group up to and including position up_to; returns the group's
-- cursor afterwards. Acknowledging again, or an earlier position, changes nothing (a consumer that
-- crashed after acknowledging may do it twice). A position never given is refused: acknowledging
-- it would skip outcomes not yet delivered.
CREATE FUNCTION aclaim_results_ack(group_name text, up_to bigint, org bigint DEFAULT NULL,
                                   now_us bigint DEFAULT NULL)
    RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER AS $$
DECLARE
    o bigint := aclaim_api_org(org);
    head bigint;
    done bigint;
BEGIN
    head := coalesce((SELECT h.last_seq FROM result_heads h WHERE h.org_id = o), 0);
    IF up_to IS NULL OR up_to > head THEN
        RAISE EXCEPTION 'ack: position % of organization % was never delivered (the last given '
                        'is %)', up_to, o, head USING ERRCODE = 'invalid_parameter_value';
    END IF;
    UPDATE result_groups g
       SET acked = greatest(g.acked, up_to),
           acked_at = CASE WHEN up_to > g.acked
                           THEN aclaim_ts(coalesce(now_us, aclaim_us(statement_timestamp())))
                           ELSE g.acked_at END
     WHERE g.org_id = o AND g.name = group_name
    RETURNING g.acked INTO done;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'organization % has no consumer group %', o, quote_literal(group_name)
            USING ERRCODE = 'undefined_object';
    END IF;
    RETURN done;
END $$;

-- ---- privileges ----
-- Definer functions run with the owner's rights: their search_path is pinned (pg_temp last, so a
-- caller's temporary table cannot stand in for jobs), nobody but aclaim_producer may call the API,
-- and the internal ones are not callable at all except by the owner.
DO $$
DECLARE
    f record;
BEGIN
    FOR f IN SELECT p.oid::regprocedure AS sig, p.proname
               FROM pg_proc p
              WHERE p.pronamespace = current_schema()::regnamespace
                AND p.proname IN ('aclaim_results_sequence', 'aclaim_producer_org', 'aclaim_api_org',
                                  'aclaim_producer_bind', 'aclaim_producer_unbind',
                                  'aclaim_enqueue', 'aclaim_enqueue_many',
                                  'aclaim_cancel', 'aclaim_job_status',
                                  'aclaim_results_group_create', 'aclaim_results_group_drop',
                                  'aclaim_results_groups', 'aclaim_results_fetch',
                                  'aclaim_results_ack')
    LOOP
        EXECUTE format('ALTER FUNCTION %s SET search_path = %I, pg_temp', f.sig, current_schema());
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', f.sig);
        IF f.proname NOT IN ('aclaim_api_org', 'aclaim_producer_bind', 'aclaim_producer_unbind',
                             'aclaim_results_sequence')
        THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO aclaim_producer', f.sig);
        END IF;
    END LOOP;
END $$;

-- A coordinator (and the console) make terminal transitions under row-level security: the
-- outcomes their statements record are theirs to insert, in the organization the transaction names.
GRANT SELECT, INSERT ON job_outcomes TO aclaim_coordinator;
GRANT SELECT ON result_groups, result_heads TO aclaim_coordinator;
ALTER TABLE job_outcomes ENABLE ROW LEVEL SECURITY;
ALTER TABLE result_groups ENABLE ROW LEVEL SECURITY;
ALTER TABLE result_heads ENABLE ROW LEVEL SECURITY;
ALTER TABLE producer_logins ENABLE ROW LEVEL SECURITY;
CREATE POLICY org_scope ON job_outcomes TO aclaim_coordinator
    USING (aclaim_org_visible(org_id)) WITH CHECK (aclaim_org_visible(org_id));
CREATE POLICY org_scope ON result_groups TO aclaim_coordinator USING (aclaim_org_visible(org_id));
CREATE POLICY org_scope ON result_heads TO aclaim_coordinator USING (aclaim_org_visible(org_id));

-- A producer reads its own organization's rows, and nothing else; it writes none directly. The
-- policies compare with the binding once per statement (an initplan), not once per row.
GRANT SELECT ON jobs, job_events, job_results, job_outcomes, result_groups, job_queues
    TO aclaim_producer;
CREATE POLICY producer_scope ON jobs FOR SELECT TO aclaim_producer
    USING (org_id = (SELECT aclaim_producer_org()));
CREATE POLICY producer_scope ON job_events FOR SELECT TO aclaim_producer
    USING (org_id = (SELECT aclaim_producer_org()));
CREATE POLICY producer_scope ON job_results FOR SELECT TO aclaim_producer
    USING (org_id = (SELECT aclaim_producer_org()));
CREATE POLICY producer_scope ON job_outcomes FOR SELECT TO aclaim_producer
    USING (org_id = (SELECT aclaim_producer_org()));
CREATE POLICY producer_scope ON result_groups FOR SELECT TO aclaim_producer
    USING (org_id = (SELECT aclaim_producer_org()));
CREATE POLICY producer_scope ON job_queues FOR SELECT TO aclaim_producer
    USING (org_id = (SELECT aclaim_producer_org()));
