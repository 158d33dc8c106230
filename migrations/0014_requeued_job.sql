-- A finished job put back among the live jobs, written once: a retry, a bulk
-- retry or redrive, and a failed job's move to its queue's dead-letter queue
-- each build the live row with skiplock.requeued_job. Before, each wrote the
-- jobs' column list of its own, and a column added to the jobs had to be
-- added to all three.
--
-- The function returns a whole skiplock.jobs row, so a column added to the
-- jobs that it does not give fails every requeue (the row no longer matches
-- its declared type) rather than being dropped without a word.
CREATE FUNCTION skiplock.requeued_job(finished skiplock.finished_jobs, into_queue text)
RETURNS skiplock.jobs
LANGUAGE sql STABLE AS $$
  -- Queued now, with a fresh set of attempts, no lease and no expiry; what
  -- the job did before (its first start, progress, last error, run time)
  -- stays for its history.
  SELECT finished.id, into_queue::skiplock.short_name, finished.type, finished.tenant, 'queued',
         finished.priority, now(), 0::skiplock.attempt_count, finished.max_attempts, finished.lease_seconds,
         finished.backoff_base_seconds, finished.backoff_max_seconds, NULL::timestamptz, finished.dedup_key,
         finished.dedup_window_seconds, finished.created_at, finished.first_started_at, finished.started_at,
         NULL::text, NULL::uuid, NULL::timestamptz, NULL::timestamptz, finished.payload, finished.progress,
         finished.last_error, finished.callback_url, finished.failure_callback_url, finished.run_ms, finished.tags
$$;

CREATE OR REPLACE FUNCTION skiplock.to_dead_letter_queue() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  target text;
BEGIN
  SELECT q.dead_letter_queue INTO target FROM skiplock.queues q WHERE q.name = NEW.queue;
  IF target IS NULL
     OR EXISTS (SELECT 1 FROM skiplock.keyed_jobs k
                WHERE k.job_id = NEW.id AND k.slot IN ('taken', 'started', 'waiting'))
     OR EXISTS (SELECT 1 FROM skiplock.job_events e
                WHERE e.job_id = NEW.id AND e.kind = 'retried' AND e.detail ? 'deadLetter') THEN
    RETURN NULL;
  END IF;
  WITH gone AS (
    DELETE FROM skiplock.finished_jobs f WHERE f.id = NEW.id AND f.finished_at = NEW.finished_at RETURNING f
  ),
  back AS (
    INSERT INTO skiplock.jobs SELECT r.* FROM gone, LATERAL skiplock.requeued_job(gone.f, target) r
    RETURNING id
  )
  INSERT INTO skiplock.job_events (job_id, kind, attempt, detail)
  SELECT b.id, 'retried', 0, jsonb_build_object('deadLetter', true, 'fromQueue', NEW.queue) FROM back b;
  RETURN NULL;
END
$$;
