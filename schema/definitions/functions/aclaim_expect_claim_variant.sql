-- The guard that lets a mixed transaction send its COMMIT with its statements, in one message.
--
-- A coordinator that has run a mixed transaction (completions and one organization's claims) for
-- a set of served queues remembers which claim statement those queues call for: the plain one,
-- or the variant for a rate limit, a weight or exclusions (common/store/store_sql.hpp,
-- kClaimLocks). The next mixed transaction for the same queues sends BEGIN, the claim's locks,
-- the completions, the remembered claim statement and COMMIT together
-- (AssignmentStore::complete_and_claim_sent_together). Between the two, an operator may have
-- given a served queue a rate or a weight, or an enqueue may have flagged one for exclusions; the
-- remembered statement would then hand out jobs the queue's settings hold back. The claim's locks
-- (kClaimLocksExpecting) pass what they find through this function, which raises when it is not
-- what the sender expected: the transaction aborts before its claim runs, the COMMIT sent after
-- it ends nothing, and the sender rolls back and runs the transaction statement by statement.
--
-- `found_bits` and `expected_bits` are the variant's bits: 1 a served queue has a rate, 2 one has a
-- weight, 4 exclusions may apply. SQLSTATE ACV01 names this refusal alone.
CREATE OR REPLACE FUNCTION aclaim_expect_claim_variant(found_bits integer, expected_bits integer)
RETURNS integer
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    IF found_bits IS DISTINCT FROM expected_bits THEN
        RAISE EXCEPTION 'the served queues call for claim variant %, not the % sent',
            found_bits, expected_bits
            USING ERRCODE = 'ACV01';
    END IF;
    RETURN found_bits;
END $$;
