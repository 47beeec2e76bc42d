-- The fencing epoch: a generation granted after a promotion outranks every generation the lost
-- history of the old primary can have granted.
--
-- A failover that loses commits (asynchronous replication, or a standby promoted while it was
-- cut off) leaves workers holding claims the new primary never saw. Counting on from the rows
-- the new primary has would hand the same (job, generation) to someone else, and two workers
-- would hold one fencing token. PostgreSQL gives every promotion a new timeline, higher than
-- the one it was promoted from (the old primary's, whose lost commits are therefore all on a
-- lower timeline). A claim takes the next generation or, when that is lower, the first one of
-- the current timeline's range: timeline t owns the generations from (t - 1) * 2^32 + 1 on. On
-- timeline 1, the only one a database that never failed over knows, nothing changes. A job can
-- be claimed 2^32 times per timeline before its range could reach the next one's.
--
-- pg_walfile_name names the segment on the timeline WAL is being written on; it refuses to run
-- on a standby, where no claim could run either.
CREATE OR REPLACE FUNCTION aclaim_timeline() RETURNS bigint
    LANGUAGE sql STABLE
    RETURN ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint;

GRANT EXECUTE ON FUNCTION aclaim_timeline() TO aclaim_coordinator;
