-- Creates a consumer group of the caller's organization, or returns the existing one unchanged.
-- start_at 'latest': the group receives outcomes committed from now on (and any still being
-- committed); 'earliest': every outcome still kept.
CREATE OR REPLACE FUNCTION aclaim_results_group_create(group_name text, start_at text DEFAULT 'latest',
                                            org bigint DEFAULT NULL, now_us bigint DEFAULT NULL)
    RETURNS TABLE (org_id bigint, acked bigint, created boolean)
    LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
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

REVOKE ALL ON FUNCTION aclaim_results_group_create(text, text, bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION aclaim_results_group_create(text, text, bigint, bigint) TO aclaim_producer;
