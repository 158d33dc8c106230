-- skiplock 0024: a queue's rate limit may drop its excess.
--
-- A queue's rate limit (0016) throttles: the excess waits in the queue. With
-- `rate_mode` 'drop', a job enqueued while the queue's window has no room
-- for it ends cancelled at once, saying why, as a rate key's drop does
-- (0008): the room is the limit less the queue's starts in the window that
-- ends now and less the jobs it let through that have not started yet (its
-- turns), so turns never outrun the window. The claims keep the limit on
-- starts as before; a job let through may still wait there behind a retry,
-- which needs no turn.
--
-- The queue's enqueues take turns on an advisory lock of the queue, not its
-- row: a claim of the queue locks the row (SKIP LOCKED), and an enqueue
-- holding it until it commits would turn the claims away. Each enqueue counts
-- after that lock, in a statement of its own, so it sees the turns and the
-- starts committed before it.

ALTER TABLE skiplock.queues
  ADD COLUMN rate_mode text NOT NULL DEFAULT 'throttle',
  ADD CONSTRAINT queues_rate_mode_known CHECK (rate_mode IN ('throttle', 'drop')),
  -- Drop what? Only a limit has an excess.
  ADD CONSTRAINT queues_rate_mode_needs_limit CHECK (rate_mode = 'throttle' OR rate_limit IS NOT NULL);

-- The jobs a 'drop' queue let through, by the attempt count they had then: a
-- turn is spent once its job has started (a claim counts the attempt) or has
-- left the live jobs. Spent turns go at the queue's next enqueue. No foreign
-- key to the queue: its key lock would turn the queue's claims away.
CREATE TABLE skiplock.queue_turns (
  job_id   uuid    PRIMARY KEY,
  queue    text    NOT NULL,
  attempts integer NOT NULL
);
CREATE INDEX queue_turns_queue_idx ON skiplock.queue_turns (queue);

-- Runs after jobs_inserted_take_key_slots (triggers of an event fire in
-- name order), so a job a rate key dropped is gone, and one a key holds is
-- judged like any other: it takes a turn of the queue until it starts.
CREATE FUNCTION skiplock.drop_beyond_queue_rate() RETURNS trigger
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
  dropping text[];
  queue_name text;
BEGIN
  -- One probe of a small table while no queue drops.
  IF NOT EXISTS (SELECT 1 FROM skiplock.queues q WHERE q.rate_mode = 'drop') THEN
    RETURN NULL;
  END IF;
  SELECT array_agg(q.name ORDER BY q.name) INTO dropping
  FROM skiplock.queues q
  WHERE q.rate_mode = 'drop' AND q.name IN (SELECT i.queue FROM inserted i);
  IF dropping IS NULL THEN
    RETURN NULL;
  END IF;
  -- In name order, so two enqueues of the same queues cannot deadlock.
  FOREACH queue_name IN ARRAY dropping LOOP
    PERFORM pg_advisory_xact_lock(hashtextextended(jsonb_build_array('queue-rate', queue_name)::text, 0));
  END LOOP;

  -- This statement's jobs still live (a rate key may have dropped some), in
  -- enqueue order within their queue.
  WITH arrived AS MATERIALIZED (
    SELECT j.id, j.queue::text AS queue, j.attempts::integer AS attempts,
           row_number() OVER (PARTITION BY j.queue ORDER BY j.id) AS place
    FROM inserted i JOIN skiplock.jobs j ON j.id = i.id
    WHERE i.queue = ANY (dropping)
  ),
  -- A job run again (a retry of a finished job) takes a new turn below.
  spent AS (
    DELETE FROM skiplock.queue_turns t
    WHERE t.queue = ANY (dropping) AND t.job_id NOT IN (SELECT a.id FROM arrived a)
      AND NOT EXISTS (SELECT 1 FROM skiplock.jobs j WHERE j.id = t.job_id AND j.attempts = t.attempts)
    RETURNING t.job_id
  ),
  room AS MATERIALIZED (
    SELECT q.name, q.rate_limit, q.rate_seconds,
           q.rate_limit - skiplock.window_starts(q.starts, q.rate_seconds, clock_timestamp())
             - (SELECT count(*)::integer FROM skiplock.queue_turns t
                WHERE t.queue = q.name AND t.job_id NOT IN (SELECT s.job_id FROM spent s)
                  AND t.job_id NOT IN (SELECT a.id FROM arrived a)) AS free
    FROM skiplock.queues q
    WHERE q.name = ANY (dropping)
  ),
  admitted AS (
    INSERT INTO skiplock.queue_turns (job_id, queue, attempts)
    SELECT a.id, a.queue, a.attempts FROM arrived a JOIN room r ON r.name = a.queue WHERE a.place <= r.free
    ON CONFLICT (job_id) DO UPDATE SET queue = EXCLUDED.queue, attempts = EXCLUDED.attempts
  ),
  -- The rest end cancelled, saying why, as a cancel would end them.
  dropped AS (
    SELECT a.id, format('its queue %s was at its rate limit (%s starts in %s s)', r.name, r.rate_limit,
                        r.rate_seconds) AS reason
    FROM arrived a JOIN room r ON r.name = a.queue WHERE a.place > greatest(r.free, 0)
  ),
  ended AS (
    DELETE FROM skiplock.jobs j USING dropped d WHERE j.id = d.id
    RETURNING skiplock.as_finished(j, 'cancelled', NULL,
                jsonb_build_object('name', 'RateLimitedError', 'message', d.reason)) AS finished, d.reason
  ),
  finished AS (
    INSERT INTO skiplock.finished_jobs SELECT (e.finished).* FROM ended e
  )
  INSERT INTO skiplock.job_events (job_id, kind, attempt, detail)
  SELECT (e.finished).id, 'cancelled', (e.finished).attempts, jsonb_build_object('reason', e.reason) FROM ended e;
  RETURN NULL;
END
$$;

CREATE TRIGGER jobs_inserted_within_queue_rate
  AFTER INSERT ON skiplock.jobs
  REFERENCING NEW TABLE AS inserted
  FOR EACH STATEMENT EXECUTE FUNCTION skiplock.drop_beyond_queue_rate();
