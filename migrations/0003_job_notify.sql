-- Wake-ups for workers that LISTEN (the Node worker): every statement that
-- inserts jobs sends one NOTIFY on channel `skiplock_jobs`.
--
-- Once per statement, not per row: NOTIFY takes a global lock at commit, and
-- Postgres folds identical notifications of one transaction into one, so a
-- batch enqueue of 1,000 jobs costs one notification. No transition table
-- either: copying every inserted row to find out whether any is ready now
-- would cost enqueues more than the odd needless wake-up (a delayed job) costs
-- a worker. Jobs that become ready later (delays, retries, hand-backs) are
-- found by the workers' polling.
CREATE FUNCTION skiplock.notify_jobs_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('skiplock_jobs', '');
  RETURN NULL;
END
$$;

CREATE TRIGGER jobs_notify_inserted
  AFTER INSERT ON skiplock.jobs
  FOR EACH STATEMENT EXECUTE FUNCTION skiplock.notify_jobs_inserted();
