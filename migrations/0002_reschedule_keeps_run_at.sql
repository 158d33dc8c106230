-- skiplock 0002: a change of priority alone keeps the job's start time.
--
-- 0001's reschedule took greatest(run_at or now() + delay, now()) as the new
-- start, and greatest() skips nulls: with neither given it was now(), so a
-- priority change moved a scheduled job, or one waiting out its retry
-- backoff, to now (through PATCH /v1/jobs/{id} and UPDATE skiplock.all_jobs).

-- Changes the priority or start time (run_at, or a delay from now) of a
-- waiting job, under its row lock so a claim cannot take it halfway; a null
-- leaves that one as it is. A job moved to the future waits as scheduled,
-- one moved to now as queued; a job waiting for a retry stays retrying. The
-- change is recorded as a `rescheduled` event with what it was. One row for
-- a live job (only_tenant: of that tenant): the job, and 'rescheduled', or
-- 'not_waiting' (it runs) or 'after_expiry' (the new time is at or past its
-- expires_at, so it could never start), which change nothing. No row for a
-- finished job or none.
CREATE OR REPLACE FUNCTION skiplock.reschedule(
  job_id uuid, priority integer DEFAULT NULL, run_at timestamptz DEFAULT NULL, delay interval DEFAULT NULL,
  only_tenant text DEFAULT NULL)
RETURNS TABLE (job json, outcome text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  IF reschedule.priority NOT BETWEEN -1000 AND 1000 THEN
    PERFORM skiplock.refuse('priority', format('must be from -1000 to 1000, not %s', reschedule.priority));
  ELSIF reschedule.run_at IS NOT NULL AND reschedule.delay IS NOT NULL THEN
    PERFORM skiplock.refuse('delay', 'give run_at or delay, not both');
  ELSIF reschedule.delay < interval '0' THEN
    PERFORM skiplock.refuse('delay', format('must not be negative, not %s', reschedule.delay));
  END IF;
  RETURN QUERY
  WITH target AS MATERIALIZED (
    SELECT j.id, j.state, j.priority, j.run_at, j.expires_at,
           coalesce(reschedule.priority::smallint, j.priority) AS new_priority,
           CASE WHEN reschedule.run_at IS NULL AND reschedule.delay IS NULL THEN j.run_at
                ELSE greatest(coalesce(reschedule.run_at, now() + reschedule.delay), now()) END AS new_run_at
    FROM skiplock.jobs j
    WHERE j.id = reschedule.job_id AND (only_tenant IS NULL OR j.tenant = only_tenant)
    FOR UPDATE
  ),
  changed AS (
    UPDATE skiplock.jobs j
    SET priority = t.new_priority,
        run_at = t.new_run_at,
        state = CASE WHEN (reschedule.run_at IS NULL AND reschedule.delay IS NULL) OR j.state = 'retrying' THEN j.state
                     WHEN t.new_run_at > now() THEN 'scheduled' ELSE 'queued' END
    FROM target t
    WHERE j.id = t.id AND t.state <> 'running' AND (t.expires_at IS NULL OR t.new_run_at < t.expires_at)
    RETURNING j.id, j.attempts, skiplock.job_json(j) AS job
  ),
  events AS (
    INSERT INTO skiplock.job_events (job_id, kind, attempt, detail)
    SELECT c.id, 'rescheduled', c.attempts,
           jsonb_build_object('from', jsonb_build_object('priority', t.priority, 'runAt', skiplock.iso(t.run_at)),
                              'to', jsonb_build_object('priority', t.new_priority, 'runAt', skiplock.iso(t.new_run_at)))
    FROM changed c JOIN target t ON t.id = c.id
  )
  SELECT c.job, 'rescheduled'::text FROM changed c
  UNION ALL
  SELECT skiplock.job_json(j), CASE WHEN t.state = 'running' THEN 'not_waiting' ELSE 'after_expiry' END
  FROM target t JOIN skiplock.jobs j ON j.id = t.id
  WHERE NOT EXISTS (SELECT 1 FROM changed);
END
$$;
