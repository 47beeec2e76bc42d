-- The previous release's completions go on against the view job_results (0015).
--
-- Up to 0014 a completion (sql::kComplete and kCompleteBatch of binaries built before 0015) wrote
-- the job's completed outcome (record_outcomes) and, in the same statement, a job_results row.
-- 0015 turned job_results into a view of the completed outcomes, and a coordinator of the previous
-- release that was still running when it was applied had every completion refused: the view
-- grants no INSERT to aclaim_coordinator, and an insert through it would have left the outcome
-- NULL (not-null violation) or, given one, a second completed outcome (job_outcomes_result). The
-- whole statement failed, so nothing was half-written, but no old coordinator could complete a
-- job until it was replaced: drills/upgrade found it (docs/operations.md, "Upgrades and
-- migrations").
--
-- An insert into job_results is now accepted when it is the row such a completion writes: the
-- statement has already set the job completed at that generation with that result (the
-- trigger's queries see the statement's earlier changes), and the same statement writes the
-- completed outcome, which is the row the view shows. The trigger then writes nothing more, so
-- a completion still writes one verdict row. Any other insert (a job that is not completed at
-- that generation with that result) is refused, as before: results are written by completions.
CREATE OR REPLACE FUNCTION job_results_insert_of_completion() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM jobs j
                WHERE j.id = NEW.job_id AND j.org_id = NEW.org_id AND j.state = 'completed'
                  AND j.generation = NEW.generation
                  AND j.result_ref IS NOT DISTINCT FROM NEW.result_ref) THEN
        RETURN NEW;
    END IF;
    RAISE EXCEPTION USING
        ERRCODE = 'object_not_in_prerequisite_state',
        MESSAGE = format('job_results is a view of job_outcomes (schema/0015): job %s is not '
                         'completed at generation %s with result %L, so there is no completion '
                         'whose row this is', NEW.job_id, NEW.generation, NEW.result_ref),
        HINT = 'Results are written by completions, which record the completed outcome.';
END
$$;
