-- The console's overview per queue. jobs_org_state gains the queue and run_at: the same index then
-- answers what it did (organizations by a skip scan, per organization and state counts capped by
-- index-only scans) and, per organization and state, the queues that hold jobs (a skip scan over
-- its third column), each queue's count (an index-only scan of one prefix) and its oldest
-- claimable job (the first entry of the prefix (org, 'pending', queue)). No index is added: the
-- write cost is still one entry per insert and per state change, and renewals, which touch only
-- lease_expires_at, stay HOT.
-- Built in the migration's transaction, which blocks writes to jobs while it builds: on a large
-- installation apply it in a quiet moment, as 0006.
DROP INDEX jobs_org_state;
CREATE INDEX jobs_org_state ON jobs (org_id, state, queue, run_at);

-- The console pauses and resumes queues under row-level security like its other actions, so the
-- role it acts as writes a queue's switch and its audit row (the policies of 0005 confine both to
-- the organization in scope). queue_events stays append-only (its trigger).
GRANT INSERT, UPDATE ON job_queues TO aclaim_coordinator;
GRANT INSERT ON queue_events TO aclaim_coordinator;

-- Connected workers per coordinator, for the console: sessions live only in a coordinator's
-- memory, so each coordinator writes here every --presence-interval-ms how many workers (distinct
-- worker ids) it serves in each organization, and removes its rows when it stops cleanly. A row
-- not refreshed for three intervals is a coordinator that is gone or cut off from the database;
-- readers leave it out, and any coordinator removes it after an hour. Nothing else reads it: no
-- guarantee depends on it. The organization leads the key, as everywhere.
CREATE TABLE coordinator_presence (
    org_id      bigint      NOT NULL CHECK (org_id > 0),
    coordinator text        NOT NULL CHECK (length(coordinator) BETWEEN 1 AND 300),
    endpoint    text        NOT NULL,
    workers     integer     NOT NULL CHECK (workers >= 0),
    -- The writer's --presence-interval-ms: a reader takes a row as live for three of them.
    interval_ms integer     NOT NULL CHECK (interval_ms > 0),
    started_at  timestamptz NOT NULL,
    seen_at     timestamptz NOT NULL,
    PRIMARY KEY (org_id, coordinator)
);
ALTER TABLE coordinator_presence ENABLE ROW LEVEL SECURITY;
CREATE POLICY org_scope ON coordinator_presence TO aclaim_coordinator
    USING (aclaim_org_visible(org_id)) WITH CHECK (aclaim_org_visible(org_id));
GRANT SELECT, INSERT, UPDATE, DELETE ON coordinator_presence TO aclaim_coordinator;
