DROP POLICY IF EXISTS coordinator_reads ON park_refusal_counts;
CREATE POLICY coordinator_reads ON park_refusal_counts FOR SELECT TO aclaim_coordinator USING (true);
