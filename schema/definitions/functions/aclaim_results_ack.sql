-- Acknowledges every outcome of the group up to and including position up_to; returns the group's
-- cursor afterwards. Acknowledging again, or an earlier position, changes nothing (a consumer that
-- crashed after acknowledging may do it twice). A position never given is refused: acknowledging
-- it would skip outcomes not yet delivered.
CREATE OR REPLACE FUNCTION aclaim_results_ack(group_name text, up_to bigint, org bigint DEFAULT NULL,
                                   now_us bigint DEFAULT NULL)
    RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
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

REVOKE ALL ON FUNCTION aclaim_results_ack(text, bigint, bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION aclaim_results_ack(text, bigint, bigint, bigint) TO aclaim_producer;
