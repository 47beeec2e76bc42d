-- A fabricated outage: two organizations with jobs in every recovery class and one row that
-- contradicts its own result. See README.md beside this file for each group and the story.
--
-- Load after `aclaimctl migrate`, into an empty database, with the outage clock in microseconds
-- since the epoch:
--     psql -v ON_ERROR_STOP=1 -v now_us=<microseconds> -f outage.sql
-- and classify with `aclaimctl recover --now @<the same microseconds>`. Every time below is
-- relative to that clock, so the "live" leases are still live when a real coordinator starts on
-- the system clock right after loading.

\set ON_ERROR_STOP on
BEGIN;

SELECT set_config('aclaim.drill_now', :'now_us', true) AS drill_now \gset

-- The outage clock plus a number of minutes (negative: before it).
CREATE FUNCTION pg_temp.t(minutes integer) RETURNS timestamptz LANGUAGE sql STABLE
    RETURN aclaim_ts(current_setting('aclaim.drill_now')::bigint + minutes * 60000000::bigint);

DO $$ BEGIN
    IF EXISTS (SELECT 1 FROM jobs) OR EXISTS (SELECT 1 FROM job_events) THEN
        RAISE EXCEPTION 'the outage dataset loads into an empty database only';
    END IF;
END $$;

-- Leases here are 60 minutes long (human review), so lease_expires_at = claimed_at + 60.
INSERT INTO jobs (id, org_id, state, priority, enqueued_at, payload, generation, assignee,
                  claimed_at, lease_expires_at, attempts, max_attempts, completed_at, result_ref,
                  last_error)
OVERRIDING SYSTEM VALUE VALUES
-- organization 1 -------------------------------------------------------------------------------
-- terminal: completed at generation 1; completed at generation 2 after a reclaim; completed just
-- before the outage; failed by its reviewer
(101, 1, 'completed', 0, pg_temp.t(-130), 'doc-101', 1, 'rev-1a', pg_temp.t(-110), NULL, 1, 3, pg_temp.t(-100), 'results/1/101.json', NULL),
(102, 1, 'completed', 0, pg_temp.t(-260), 'doc-102', 2, 'rev-1c', pg_temp.t(-90), NULL, 2, 3, pg_temp.t(-80), 'results/1/102.json', NULL),
(103, 1, 'completed', 5, pg_temp.t(-60), 'doc-103', 1, 'rev-1b', pg_temp.t(-50), NULL, 1, 3, pg_temp.t(-30), 'results/1/103.json', NULL),
(104, 1, 'failed', 0, pg_temp.t(-70), 'doc-104', 1, 'rev-1a', pg_temp.t(-60), NULL, 1, 3, pg_temp.t(-50), NULL, 'unreadable document'),
-- live: leases that end 20 and 30 minutes after the outage clock
(105, 1, 'assigned', 0, pg_temp.t(-45), 'doc-105', 1, 'rev-1d', pg_temp.t(-40), pg_temp.t(20), 1, 3, NULL, NULL, NULL),
(106, 1, 'assigned', 0, pg_temp.t(-160), 'doc-106', 2, 'rev-1f', pg_temp.t(-30), pg_temp.t(30), 2, 3, NULL, NULL, NULL),
-- expired during the outage (the reaper was down): 15 and 10 minutes before the outage clock
(107, 1, 'assigned', 0, pg_temp.t(-80), 'doc-107', 1, 'rev-1a', pg_temp.t(-75), pg_temp.t(-15), 1, 3, NULL, NULL, NULL),
(108, 1, 'assigned', 0, pg_temp.t(-210), 'doc-108', 2, 'rev-1c', pg_temp.t(-70), pg_temp.t(-10), 2, 3, NULL, NULL, NULL),
-- pending: never claimed; reclaimed by the reaper before the outage
(109, 1, 'pending', 0, pg_temp.t(-15), 'doc-109', 0, NULL, NULL, NULL, 0, 3, NULL, NULL, NULL),
(110, 1, 'pending', 0, pg_temp.t(-190), 'doc-110', 1, NULL, NULL, NULL, 1, 3, NULL, NULL, NULL),
-- waiting: enqueued with a dependency (109) that has not ended; never claimed, and left waiting
(112, 1, 'waiting', 0, pg_temp.t(-14), 'doc-112', 0, NULL, NULL, NULL, 0, 3, NULL, NULL, NULL),
-- THE CONTRADICTORY ROW: assigned at generation 3 with an expired lease, while job_results
-- already publishes a result of generation 3 (see README.md)
(111, 1, 'assigned', 0, pg_temp.t(-310), 'doc-111', 3, 'rev-1c', pg_temp.t(-72), pg_temp.t(-12), 3, 5, NULL, NULL, NULL),
-- organization 2 -------------------------------------------------------------------------------
-- terminal: two completions; one failure by the reaper on its last attempt before the outage
(201, 2, 'completed', 0, pg_temp.t(-125), 'doc-201', 1, 'rev-2a', pg_temp.t(-120), NULL, 1, 3, pg_temp.t(-105), 'results/2/201.json', NULL),
(202, 2, 'completed', 0, pg_temp.t(-100), 'doc-202', 1, 'rev-2b', pg_temp.t(-95), NULL, 1, 3, pg_temp.t(-40), 'results/2/202.json', NULL),
(203, 2, 'failed', 0, pg_temp.t(-205), 'doc-203', 1, 'rev-2c', pg_temp.t(-200), NULL, 1, 1, pg_temp.t(-130), NULL, 'lease expired on attempt 1'),
-- live
(204, 2, 'assigned', 0, pg_temp.t(-40), 'doc-204', 1, 'rev-2b', pg_temp.t(-35), pg_temp.t(25), 1, 3, NULL, NULL, NULL),
(205, 2, 'assigned', 0, pg_temp.t(-25), 'doc-205', 1, 'rev-2c', pg_temp.t(-20), pg_temp.t(40), 1, 3, NULL, NULL, NULL),
-- expired: 206 has the organization's highest priority, so the drill's worker claims it first;
-- 207 is on its last attempt, so reclaiming it fails it, exactly as the reaper would
(206, 2, 'assigned', 10, pg_temp.t(-85), 'doc-206', 1, 'rev-2a', pg_temp.t(-80), pg_temp.t(-20), 1, 3, NULL, NULL, NULL),
(207, 2, 'assigned', 0, pg_temp.t(-305), 'doc-207', 2, 'rev-2d', pg_temp.t(-65), pg_temp.t(-5), 2, 2, NULL, NULL, NULL),
-- pending
(208, 2, 'pending', 0, pg_temp.t(-30), 'doc-208', 0, NULL, NULL, NULL, 0, 3, NULL, NULL, NULL),
(209, 2, 'pending', 0, pg_temp.t(-10), 'doc-209', 0, NULL, NULL, NULL, 0, 3, NULL, NULL, NULL);

SELECT setval(pg_get_serial_sequence('jobs', 'id'), (SELECT max(id) FROM jobs)) AS last_id \gset

-- Job 112 waits for job 109 (schema/baseline/tables.sql).
UPDATE jobs SET has_dependents = true WHERE id = 109;
INSERT INTO job_dependencies (org_id, job_id, depends_on) VALUES (1, 112, 109);

-- The audit log, in the order the store would have written it.
INSERT INTO job_events (job_id, org_id, generation, kind, worker, at, detail)
SELECT e.job_id, e.org_id, e.generation, e.kind, e.worker, pg_temp.t(e.minute), e.detail
  FROM (VALUES
    (101, 1, 0, 'enqueued', NULL, -130, ''),
    (101, 1, 1, 'claimed', 'rev-1a', -110, ''),
    (101, 1, 1, 'completed', 'rev-1a', -100, 'results/1/101.json'),
    (102, 1, 0, 'enqueued', NULL, -260, ''),
    (102, 1, 1, 'claimed', 'rev-1b', -250, ''),
    (102, 1, 1, 'reclaimed', 'rev-1b', -190, 'lease expired'),
    (102, 1, 2, 'claimed', 'rev-1c', -90, ''),
    (102, 1, 2, 'completed', 'rev-1c', -80, 'results/1/102.json'),
    (103, 1, 0, 'enqueued', NULL, -60, ''),
    (103, 1, 1, 'claimed', 'rev-1b', -50, ''),
    (103, 1, 1, 'completed', 'rev-1b', -30, 'results/1/103.json'),
    (104, 1, 0, 'enqueued', NULL, -70, ''),
    (104, 1, 1, 'claimed', 'rev-1a', -60, ''),
    (104, 1, 1, 'failed', 'rev-1a', -50, 'failure: unreadable document'),
    (105, 1, 0, 'enqueued', NULL, -45, ''),
    (105, 1, 1, 'claimed', 'rev-1d', -40, ''),
    (106, 1, 0, 'enqueued', NULL, -160, ''),
    (106, 1, 1, 'claimed', 'rev-1e', -150, ''),
    (106, 1, 1, 'reclaimed', 'rev-1e', -90, 'lease expired'),
    (106, 1, 2, 'claimed', 'rev-1f', -30, ''),
    (107, 1, 0, 'enqueued', NULL, -80, ''),
    (107, 1, 1, 'claimed', 'rev-1a', -75, ''),
    (108, 1, 0, 'enqueued', NULL, -210, ''),
    (108, 1, 1, 'claimed', 'rev-1b', -200, ''),
    (108, 1, 1, 'reclaimed', 'rev-1b', -140, 'lease expired'),
    (108, 1, 2, 'claimed', 'rev-1c', -70, ''),
    (109, 1, 0, 'enqueued', NULL, -15, ''),
    (112, 1, 0, 'enqueued', NULL, -14, ''),
    (110, 1, 0, 'enqueued', NULL, -190, ''),
    (110, 1, 1, 'claimed', 'rev-1d', -180, ''),
    (110, 1, 1, 'reclaimed', 'rev-1d', -120, 'lease expired'),
    (111, 1, 0, 'enqueued', NULL, -310, ''),
    (111, 1, 1, 'claimed', 'rev-1a', -300, ''),
    (111, 1, 1, 'reclaimed', 'rev-1a', -240, 'lease expired'),
    (111, 1, 2, 'claimed', 'rev-1b', -200, ''),
    (111, 1, 2, 'reclaimed', 'rev-1b', -140, 'lease expired'),
    (111, 1, 3, 'claimed', 'rev-1c', -72, ''),
    (201, 2, 0, 'enqueued', NULL, -125, ''),
    (201, 2, 1, 'claimed', 'rev-2a', -120, ''),
    (201, 2, 1, 'completed', 'rev-2a', -105, 'results/2/201.json'),
    (202, 2, 0, 'enqueued', NULL, -100, ''),
    (202, 2, 1, 'claimed', 'rev-2b', -95, ''),
    (202, 2, 1, 'completed', 'rev-2b', -40, 'results/2/202.json'),
    (203, 2, 0, 'enqueued', NULL, -205, ''),
    (203, 2, 1, 'claimed', 'rev-2c', -200, ''),
    (203, 2, 1, 'failed', 'rev-2c', -130, 'lease expired'),
    (204, 2, 0, 'enqueued', NULL, -40, ''),
    (204, 2, 1, 'claimed', 'rev-2b', -35, ''),
    (205, 2, 0, 'enqueued', NULL, -25, ''),
    (205, 2, 1, 'claimed', 'rev-2c', -20, ''),
    (206, 2, 0, 'enqueued', NULL, -85, ''),
    (206, 2, 1, 'claimed', 'rev-2a', -80, ''),
    (206, 2, 1, 'checkpoint', 'rev-2a', -30, 'step=2'),
    (207, 2, 0, 'enqueued', NULL, -305, ''),
    (207, 2, 1, 'claimed', 'rev-2d', -300, ''),
    (207, 2, 1, 'reclaimed', 'rev-2d', -240, 'lease expired'),
    (207, 2, 2, 'claimed', 'rev-2d', -65, ''),
    (208, 2, 0, 'enqueued', NULL, -30, ''),
    (209, 2, 0, 'enqueued', NULL, -10, '')
  ) AS e(job_id, org_id, generation, kind, worker, minute, detail)
 ORDER BY e.minute, e.job_id;

-- The outbox: one row per completed job, written with its completion...
INSERT INTO job_outcomes (org_id, job_id, outcome, queue, generation, attempts, result_ref, at)
SELECT org_id, id, 'completed', queue, generation, attempts, result_ref, completed_at
  FROM jobs WHERE state = 'completed' ORDER BY id;
-- ...and the contradiction: a result of generation 3 for job 111, whose row still shows
-- generation 3 holding a lease and whose log has no completion.
INSERT INTO job_outcomes (org_id, job_id, outcome, queue, generation, attempts, result_ref, at)
VALUES (1, 111, 'completed', 'default', 3, 3, 'results/1/111.json', pg_temp.t(-22));

-- Saved progress (protocol 1.5). rev-2a checkpointed 206 at step 2 of its review before the
-- outage: history the next holder resumes from. And a second contradiction on 111: a report of
-- generation 4, which no claim granted (the row and its log stop at 3).
INSERT INTO job_progress (job_id, org_id, generation, percent, note, checkpoint, updated_at)
VALUES (206, 2, 1, 40, 'page 4 of 10', 'step=2', pg_temp.t(-30)),
       (111, 1, 4, 90, '', '', pg_temp.t(-21));

-- A rate-limited queue of organization 1 whose bucket was last refilled 90 minutes after the
-- outage clock: written by a coordinator whose clock ran ahead (or restored onto a host whose
-- clock is behind). Until the clock passes it the queue earns no token; recovery reports it and
-- leaves it alone.
INSERT INTO job_queues (org_id, queue, rate_per_s, rate_burst, rate_tokens, rate_refilled_us,
                        updated_at)
VALUES (1, 'exports', 2, 10, 0, :'now_us'::bigint + 90 * 60000000::bigint, pg_temp.t(-120));

COMMIT;
