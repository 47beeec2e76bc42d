-- Many jobs, one array element each (see aclaim_enqueue_jobs), their dependencies, and
-- their exclusions, one array element each: job exclude_n[i] of this call (counting from 1) may
-- not go to the reviewer exclude_keys[i], or to whoever completes exclude_jobs[i] (a job id, or -k
-- for job k of this call); exactly one of the two per element. A call without exclusions runs
-- the enqueue without exclusions alone (the other branch's one-time filter is false).
CREATE OR REPLACE FUNCTION aclaim_enqueue_many(
    payloads text[], queues text[] DEFAULT NULL, priorities integer[] DEFAULT NULL,
    run_at_us bigint[] DEFAULT NULL, dedupe_keys text[] DEFAULT NULL,
    max_attempts integer[] DEFAULT NULL, run_timeout_us bigint[] DEFAULT NULL,
    backoff_base_us bigint[] DEFAULT NULL, backoff_cap_us bigint[] DEFAULT NULL,
    dedupe_window_us bigint DEFAULT NULL, org bigint DEFAULT NULL, now_us bigint DEFAULT NULL,
    depends_n integer[] DEFAULT NULL, depends_on bigint[] DEFAULT NULL,
    on_failure text[] DEFAULT NULL, exclude_n integer[] DEFAULT NULL,
    exclude_keys text[] DEFAULT NULL, exclude_jobs bigint[] DEFAULT NULL)
    RETURNS TABLE (n bigint, id bigint, created boolean, state text)
    LANGUAGE sql SECURITY DEFINER SET search_path FROM CURRENT
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

REVOKE ALL ON FUNCTION aclaim_enqueue_many(text[], text[], integer[], bigint[], text[], integer[], bigint[], bigint[], bigint[], bigint, bigint, bigint, integer[], bigint[], text[], integer[], text[], bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION aclaim_enqueue_many(text[], text[], integer[], bigint[], text[], integer[], bigint[], bigint[], bigint[], bigint, bigint, bigint, integer[], bigint[], text[], integer[], text[], bigint[]) TO aclaim_producer;
