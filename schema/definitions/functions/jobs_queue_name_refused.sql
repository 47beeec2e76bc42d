CREATE OR REPLACE FUNCTION jobs_queue_name_refused() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'check_violation',
        MESSAGE = format('new row for relation "jobs" violates check constraint "queue_name": '
                         '%L is not a queue name (1..64 of A-Z a-z 0-9 _ . : -, starting with a '
                         'letter or digit)', NEW.queue),
        CONSTRAINT = 'queue_name', TABLE = 'jobs', COLUMN = 'queue';
END
$$;
