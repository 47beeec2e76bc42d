-- Up to max_rows outcomes the group has not acknowledged, in position order, after giving
-- positions to newly committed ones. The same outcomes come back at every fetch until they are
-- acknowledged. Run it in a transaction of its own (autocommit) or keep the transaction short:
-- the positions it gave are seen by other consumers once it commits.
CREATE OR REPLACE FUNCTION aclaim_results_fetch(group_name text, max_rows integer DEFAULT 100,
                                     org bigint DEFAULT NULL)
    RETURNS TABLE (seq bigint, job_id bigint, outcome text, queue text, generation bigint,
                   attempts integer, result_ref text, error text, dedupe_key text, at_us bigint)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
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

REVOKE ALL ON FUNCTION aclaim_results_fetch(text, integer, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION aclaim_results_fetch(text, integer, bigint) TO aclaim_producer;
