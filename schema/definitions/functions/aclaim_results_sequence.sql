-- Gives positions to committed outcomes that have none, oldest first, at most max_rows, and returns
-- how many; the update finds its rows through job_outcomes_unsequenced. The advisory lock is held
-- to the end of the transaction, so sequencing transactions commit one after another, and each
-- one's UPDATE, a statement begun after the lock was granted, sees every outcome committed before
-- it, including those the previous holder sequenced. An outcome whose transaction is still open is
-- invisible here and gets a later position when it commits: that is how no reader ever skips it.
-- The wait for the lock is bounded (lock_timeout), so a transaction that sequenced and stays open
-- delays delivery but never blocks a fetch.
-- SECURITY DEFINER: it writes positions in every organization and discloses nothing.
CREATE OR REPLACE FUNCTION aclaim_results_sequence(max_rows integer DEFAULT 10000) RETURNS integer
    LANGUAGE plpgsql SECURITY DEFINER SET lock_timeout = '1s' SET search_path FROM CURRENT AS $$
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
     WHERE o.id = todo.id AND o.seq IS NULL;
    GET DIAGNOSTICS given = ROW_COUNT;
    RETURN given;
END $$;

REVOKE ALL ON FUNCTION aclaim_results_sequence(integer) FROM PUBLIC;
