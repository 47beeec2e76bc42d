-- INSTEAD OF INSERT on the view job_results: coordinators of the release before job_results became
-- a view of the completed outcomes still insert a job_results row in the statement that completes
-- a job, after writing its completed outcome. Such an insert is accepted when it is the row that
-- completion writes: the statement has already set the job completed at that generation with that
-- result (the trigger's queries see the statement's earlier changes), and the same statement wrote
-- the completed outcome, which is the row the view shows. The trigger then writes nothing more,
-- so a completion writes one verdict row. Any other insert is refused: results are written by
-- completions.
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
        MESSAGE = format('job_results is a view of job_outcomes (schema/definitions/views/job_results.sql): job %s is not '
                         'completed at generation %s with result %L, so there is no completion '
                         'whose row this is', NEW.job_id, NEW.generation, NEW.result_ref),
        HINT = 'Results are written by completions, which record the completed outcome.';
END
$$;
