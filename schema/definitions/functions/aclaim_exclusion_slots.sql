-- The coalesced claim's matching of jobs to slots when exclusions may apply: `ids` the jobs the
-- claim may take, best first, `reviewers` one assignee per slot. Jobs with exclusions are placed
-- first, the one with the fewest allowed slots first (then in the given order), each in the first
-- free slot whose reviewer it does not exclude; then the others, in the given order, in the free
-- slots in slot order. A job with exclusions that finds no free allowed slot is not placed (the
-- claim leaves it pending). Greedy, so not a maximum matching in every case, but never a placement
-- in an excluded slot.
CREATE OR REPLACE FUNCTION aclaim_exclusion_slots(ids bigint[], reviewers text[])
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
