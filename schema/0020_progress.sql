-- Progress and checkpoints (protocol 1.5): the holder of a job may say how far it is (a
-- percentage and a short note) and leave a checkpoint, which the job's next holder receives in
-- ASSIGNED after a reclaim or a retry and resumes from.
--
-- A narrow table of its own rather than columns on `jobs`: a job that never reports progress
-- writes nothing here, and the claim and completion updates of `jobs` (tuned for its fillfactor,
-- 0018) stay as they were. One row per job, the latest report; written only by kProgress, which
-- fences it on the job's row (the generation must hold a live lease), so only a current holder
-- may overwrite it. The row outlives the generation that wrote it: that is what lets the next
-- holder resume.
CREATE TABLE job_progress (
    job_id     bigint      PRIMARY KEY,
    org_id     bigint      NOT NULL,
    generation bigint      NOT NULL,
    percent    smallint    NOT NULL CHECK (percent BETWEEN 0 AND 100),
    note       text        NOT NULL DEFAULT '' CHECK (octet_length(note) <= 200),
    checkpoint text        NOT NULL DEFAULT '' CHECK (octet_length(checkpoint) <= 4096),
    updated_at timestamptz NOT NULL
);

ALTER TABLE job_progress ENABLE ROW LEVEL SECURITY;
CREATE POLICY org_scope ON job_progress TO aclaim_coordinator
    USING (aclaim_org_visible(org_id)) WITH CHECK (aclaim_org_visible(org_id));
GRANT SELECT, INSERT, UPDATE ON job_progress TO aclaim_coordinator;

-- A removed job takes its progress with it, as it takes its outcomes (0013): once per statement,
-- over the removed rows, so the statements on jobs that remove nothing pay nothing.
CREATE FUNCTION jobs_forget_progress() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM job_progress p WHERE p.job_id IN (SELECT g.id FROM gone g);
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_forget_progress AFTER DELETE ON jobs REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_forget_progress();

-- A new audit kind, 'checkpoint': a PROGRESS that leaves a checkpoint is recorded in job_events
-- (a report of percentage and note alone replaces the last one and is not, so that a reviewer
-- reporting every few seconds does not grow the log). The kind is added to whatever list the
-- constraint holds now, so that a migration before this one that added kinds keeps them; NOT
-- VALID, because the rows already logged cannot hold the new kind and checking them would scan
-- every partition of job_events under an exclusive lock.
DO $$
DECLARE
    def text;
BEGIN
    SELECT pg_get_constraintdef(c.oid) INTO def
      FROM pg_constraint c
     WHERE c.conrelid = 'job_events'::regclass AND c.conname = 'job_events_kind_check';
    IF position('ARRAY[' IN def) = 0 THEN
        RAISE EXCEPTION 'job_events_kind_check has an unexpected form: %', def;
    END IF;
    def := replace(regexp_replace(def, '\s*NOT VALID\s*$', ''), 'ARRAY[',
                   'ARRAY[''checkpoint''::text, ');
    EXECUTE 'ALTER TABLE job_events DROP CONSTRAINT job_events_kind_check, '
            'ADD CONSTRAINT job_events_kind_check ' || def || ' NOT VALID';
END $$;
