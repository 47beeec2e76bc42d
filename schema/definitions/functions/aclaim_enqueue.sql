-- One job; exclude_keys: the reviewers (key names) it may not go to; exclude_completers_of: the
-- jobs whose completer it may not go to (each of the caller's organization). A call without
-- either runs the enqueue without exclusions alone (the other branch's one-time filter is false).
CREATE OR REPLACE FUNCTION aclaim_enqueue(
    payload text, queue text DEFAULT 'default', priority integer DEFAULT 0,
    run_at_us bigint DEFAULT NULL, dedupe_key text DEFAULT NULL,
    max_attempts integer DEFAULT NULL, run_timeout_us bigint DEFAULT NULL,
    backoff_base_us bigint DEFAULT NULL, backoff_cap_us bigint DEFAULT NULL,
    dedupe_window_us bigint DEFAULT NULL, org bigint DEFAULT NULL, now_us bigint DEFAULT NULL,
    depends_on bigint[] DEFAULT NULL, on_failure text DEFAULT NULL,
    exclude_keys text[] DEFAULT NULL, exclude_completers_of bigint[] DEFAULT NULL)
    RETURNS TABLE (id bigint, created boolean, state text)
    LANGUAGE sql SECURITY DEFINER SET search_path FROM CURRENT
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

REVOKE ALL ON FUNCTION aclaim_enqueue(text, text, integer, bigint, text, integer, bigint, bigint, bigint, bigint, bigint, bigint, bigint[], text, text[], bigint[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION aclaim_enqueue(text, text, integer, bigint, text, integer, bigint, bigint, bigint, bigint, bigint, bigint, bigint[], text, text[], bigint[]) TO aclaim_producer;
