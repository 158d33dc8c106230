-- Retention per queue and per job type, beside the global default (the
-- RETENTION_SECONDS a drain passes to skiplock.maintain_finished_jobs).
--
-- A finished job is kept for its type's retention, else its queue's, else
-- the default. 0 is "none": a succeeded job keeps no history; a failed,
-- cancelled or expired one is still kept, for the next retention in line
-- (its queue's, else the default), so the dead set stays for redrive.
-- Anything else is a minute or more.
--
-- The days of the history go whole, past the longest retention in force;
-- the jobs of a shorter one go row by row, in bounded sweeps that walk the
-- history once in finish order (skiplock.retention_sweeps), so neither
-- touches skiplock.jobs and a claim costs what it did.
--
-- And dead-letter queues: where a queue's jobs that fail for good move (at
-- the end of this file).

ALTER TABLE skiplock.queues ADD COLUMN retention_seconds integer
  CONSTRAINT queues_retention_none_or_a_minute CHECK (retention_seconds = 0 OR retention_seconds >= 60);

-- A job type's settings: the retention of its jobs. The drains that run a
-- type write its definition's retention here (skiplock.define_job_types);
-- a type only pull workers run is set here in SQL.
CREATE TABLE skiplock.job_types (
  type              text        PRIMARY KEY CHECK (length(type) BETWEEN 1 AND 128),
  retention_seconds integer     CONSTRAINT job_types_retention_none_or_a_minute
                                  CHECK (retention_seconds = 0 OR retention_seconds >= 60),
  updated_at        timestamptz NOT NULL DEFAULT now()
);
ANALYZE skiplock.job_types;

-- Writes the retentions of the types a drain runs (null: none of its own).
-- Only what differs is written, and a type without one gets no row, so the
-- drains of a quiet deployment write nothing.
CREATE FUNCTION skiplock.define_job_types(types text[], retentions integer[]) RETURNS void
LANGUAGE sql AS $$
  INSERT INTO skiplock.job_types AS t (type, retention_seconds)
  SELECT d.type, d.retention FROM unnest(types, retentions) AS d(type, retention)
  WHERE d.retention IS NOT NULL OR EXISTS (SELECT 1 FROM skiplock.job_types e WHERE e.type = d.type)
  ON CONFLICT (type) DO UPDATE SET retention_seconds = excluded.retention_seconds, updated_at = now()
  WHERE t.retention_seconds IS DISTINCT FROM excluded.retention_seconds;
$$;

-- How long a finished job is kept, in seconds, from its type's and queue's
-- retention (null: none of their own) and the default.
CREATE FUNCTION skiplock.kept_seconds(
  state text, type_seconds integer, queue_seconds integer, default_seconds double precision)
RETURNS double precision
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN state = 'succeeded' THEN coalesce(type_seconds, queue_seconds, default_seconds)
              ELSE coalesce(nullif(type_seconds, 0), nullif(queue_seconds, 0), default_seconds) END
$$;

-- How far each shorter retention has swept the history: every job that
-- finished before swept_through with that retention or a shorter one has
-- been looked at. `settings` is the fingerprint of the retentions the sweep
-- began under; when any retention changes, every sweep starts over from
-- the oldest job, as the jobs it passed may be due now.
CREATE TABLE skiplock.retention_sweeps (
  seconds       double precision PRIMARY KEY,
  swept_through timestamptz      NOT NULL,
  settings      text             NOT NULL
);

-- 0010's function, with the longest retention in force: makes the
-- partitions of the next days; drops the days whose whole day is past the
-- longest retention (the default, or a queue's or type's longer one);
-- deletes what the default partition holds past it; then sweeps the jobs of
-- the shorter retentions (skiplock.sweep_finished_jobs, about 10,000 a
-- call). Each change waits at most lock_timeout for its lock and is
-- otherwise left for the next call, so a long reader never stalls the
-- completions queued behind a waiting drop, and two calls that meet (one
-- making a partition locks the default one) leave the work to the next.
-- Nothing goes before the statistics' rollup has summed it.
CREATE OR REPLACE FUNCTION skiplock.maintain_finished_jobs(retention interval, days_ahead integer DEFAULT 2)
RETURNS TABLE (created integer, dropped integer, deleted integer)
LANGUAGE plpgsql
SET lock_timeout = '100ms'
AS $$
DECLARE
  today date := (now() AT TIME ZONE 'UTC')::date;
  rolled timestamptz := (SELECT rolled_through FROM skiplock.attempt_stats_rollup);
  longest interval := greatest(retention,
    make_interval(secs => coalesce((SELECT max(retention_seconds) FROM skiplock.queues), 0)),
    make_interval(secs => coalesce((SELECT max(retention_seconds) FROM skiplock.job_types), 0)));
  prune_before timestamptz := least(now() - longest, rolled);
  day date;
  partition_name text;
  partition_day date;
BEGIN
  created := 0; dropped := 0; deleted := 0;
  FOR day IN SELECT generate_series(today, today + days_ahead, interval '1 day')::date LOOP
    partition_name := 'finished_jobs_' || to_char(day, 'YYYYMMDD');
    CONTINUE WHEN to_regclass('skiplock.' || partition_name) IS NOT NULL;
    BEGIN
      -- Rows of that day already in the default partition keep the day there.
      -- Reading the default partition waits for a call making another day's
      -- partition (which locks it), so it is inside the lock timeout's handler.
      CONTINUE WHEN EXISTS (
        SELECT 1 FROM skiplock.finished_jobs_default
        WHERE finished_at >= day::timestamp AT TIME ZONE 'UTC' AND finished_at < (day + 1)::timestamp AT TIME ZONE 'UTC');
      EXECUTE format('CREATE TABLE skiplock.%I PARTITION OF skiplock.finished_jobs FOR VALUES FROM (%L) TO (%L)',
                     partition_name, day::timestamp AT TIME ZONE 'UTC', (day + 1)::timestamp AT TIME ZONE 'UTC');
      created := created + 1;
    EXCEPTION WHEN lock_not_available OR duplicate_table THEN
      NULL;
    END;
  END LOOP;

  FOR partition_name IN
    SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'skiplock.finished_jobs'::regclass AND c.relname ~ '^finished_jobs_\d{8}$'
    ORDER BY c.relname
  LOOP
    partition_day := to_date(substr(partition_name, 15), 'YYYYMMDD');
    EXIT WHEN (partition_day + 1)::timestamp AT TIME ZONE 'UTC' > prune_before;
    BEGIN
      EXECUTE format('DELETE FROM skiplock.job_steps s USING skiplock.%I f WHERE s.job_id = f.id', partition_name);
      EXECUTE format('DELETE FROM skiplock.job_links l USING skiplock.%I f WHERE l.job_id = f.id', partition_name);
      EXECUTE format('DROP TABLE skiplock.%I', partition_name);
      dropped := dropped + 1;
    EXCEPTION WHEN lock_not_available THEN
      NULL;
    END;
  END LOOP;

  -- Rows of days that had no partition go one by one, in a bounded batch
  -- (the next round takes the rest): normally there are none. A call making
  -- a partition locks the default one: then they wait for the next round.
  BEGIN
    WITH gone AS (
      DELETE FROM skiplock.finished_jobs_default
      WHERE ctid = ANY(ARRAY(SELECT ctid FROM skiplock.finished_jobs_default
                             WHERE finished_at < prune_before LIMIT 10000))
      RETURNING id
    ),
    steps AS (
      DELETE FROM skiplock.job_steps s USING gone g WHERE s.job_id = g.id
    ),
    links AS (
      DELETE FROM skiplock.job_links l USING gone g WHERE l.job_id = g.id
    )
    SELECT count(*) INTO deleted FROM gone;
  EXCEPTION WHEN lock_not_available THEN
    NULL;
  END;

  deleted := deleted + skiplock.sweep_finished_jobs(retention, longest, 10000);

  -- Events whose keep has passed, once a day with the day's history (a
  -- send drops those of its own name as it goes).
  IF dropped > 0 THEN
    DELETE FROM skiplock.events e WHERE e.expires_at <= now();
  END IF;
  RETURN NEXT;
END
$$;

-- Deletes the finished jobs past a retention shorter than `longest` (which
-- the dropped days take care of), with their events, steps and links. Each
-- shorter retention walks the history in slices of finish time from where
-- it stopped, deleting in each slice every job whose own retention is that
-- one or shorter: a slice's width adapts to hold about a tenth of
-- max_rows, a call looks at about max_rows jobs at most, and no job is
-- looked at twice while the retentions stay as they are. The walk stays
-- behind the statistics' rollup, which reads an hour five minutes after it
-- ends, so a job committed late is not passed unseen. Kept: a failed job
-- that holds its ordering key (its key waits on it), and a job whose dedup
-- key still matches (its window is the dedup guarantee); the day's drop
-- takes them. A slice that waits for a lock longer than lock_timeout ends
-- the call there. One sweep at a time: another finds the lock taken and
-- returns at once.
CREATE FUNCTION skiplock.sweep_finished_jobs(retention interval, longest interval, max_rows integer)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  default_seconds double precision := extract(epoch FROM retention);
  rolled timestamptz := (SELECT rolled_through FROM skiplock.attempt_stats_rollup);
  fingerprint text := md5(concat_ws('|', default_seconds,
    (SELECT string_agg(name || '=' || retention_seconds, ',' ORDER BY name) FROM skiplock.queues
      WHERE retention_seconds IS NOT NULL),
    (SELECT string_agg(type || '=' || retention_seconds, ',' ORDER BY type) FROM skiplock.job_types
      WHERE retention_seconds IS NOT NULL)));
  oldest timestamptz;
  class_seconds double precision;
  lo timestamptz;
  hi timestamptz;
  upto timestamptz;
  width interval;
  slice_seen integer;
  slice_deleted integer;
  seen integer := 0;
  deleted integer := 0;
  stalled boolean := false;
BEGIN
  IF NOT pg_try_advisory_xact_lock(1936419947, 12) THEN
    RETURN 0;
  END IF;
  FOR class_seconds IN
    SELECT DISTINCT c.s FROM (
      SELECT default_seconds AS s
      UNION ALL SELECT q.retention_seconds FROM skiplock.queues q WHERE q.retention_seconds IS NOT NULL
      UNION ALL SELECT t.retention_seconds FROM skiplock.job_types t WHERE t.retention_seconds IS NOT NULL
    ) c
    WHERE c.s < extract(epoch FROM longest)
    ORDER BY c.s
  LOOP
    EXIT WHEN seen >= max_rows OR stalled;
    upto := least(now() - make_interval(secs => class_seconds), rolled);
    lo := NULL;
    SELECT w.swept_through INTO lo FROM skiplock.retention_sweeps w
    WHERE w.seconds = class_seconds AND w.settings = fingerprint;
    IF lo IS NULL THEN
      -- From the oldest job there is: the first day with a partition, or an older one in the default partition.
      IF oldest IS NULL THEN
        -- The default partition is locked while a call makes a partition: then the next round sweeps.
        BEGIN
          SELECT least(
            (SELECT min(to_date(substr(c.relname, 15), 'YYYYMMDD'))::timestamp AT TIME ZONE 'UTC'
             FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = 'skiplock.finished_jobs'::regclass AND c.relname ~ '^finished_jobs_\d{8}$'),
            (SELECT min(d.finished_at) FROM skiplock.finished_jobs_default d)) INTO oldest;
        EXCEPTION WHEN lock_not_available THEN
          stalled := true;
        END;
        EXIT WHEN stalled;
      END IF;
      lo := least(coalesce(oldest, upto), upto);
    END IF;
    width := interval '1 minute';
    WHILE lo < upto AND seen < max_rows LOOP
      hi := least(lo + width, upto);
      BEGIN
        WITH slice AS MATERIALIZED (
          SELECT f.id, f.finished_at, f.state, f.type, f.queue, f.tenant, f.dedup_key
          FROM skiplock.finished_jobs f
          WHERE f.finished_at >= lo AND f.finished_at < hi
        ),
        doomed AS MATERIALIZED (
          SELECT s.id, s.finished_at FROM slice s
          LEFT JOIN skiplock.job_types t ON t.type = s.type
          LEFT JOIN skiplock.queues q ON q.name = s.queue
          WHERE skiplock.kept_seconds(s.state, t.retention_seconds, q.retention_seconds, default_seconds) <= class_seconds
            AND s.id <> ALL (ARRAY(SELECT c.blocked_by FROM skiplock.concurrency_keys c WHERE c.blocked_by IS NOT NULL))
            AND (s.dedup_key IS NULL OR NOT EXISTS (
              SELECT 1 FROM skiplock.dedup_keys k
              WHERE (k.tenant, k.queue, k.dedup_key) = (s.tenant, s.queue, s.dedup_key) AND k.job_id = s.id))
        ),
        gone AS (
          DELETE FROM skiplock.finished_jobs f USING doomed d
          WHERE f.id = d.id AND f.finished_at = d.finished_at
          RETURNING f.id
        ),
        events AS (
          DELETE FROM skiplock.job_events e USING gone g WHERE e.job_id = g.id
        ),
        steps AS (
          DELETE FROM skiplock.job_steps s USING gone g WHERE s.job_id = g.id
        ),
        links AS (
          DELETE FROM skiplock.job_links l USING gone g WHERE l.job_id = g.id
        )
        SELECT (SELECT count(*) FROM slice), (SELECT count(*) FROM gone) INTO slice_seen, slice_deleted;
      EXCEPTION WHEN lock_not_available THEN
        stalled := true;
      END;
      EXIT WHEN stalled;
      seen := seen + slice_seen;
      deleted := deleted + slice_deleted;
      lo := hi;
      width := CASE WHEN slice_seen > max_rows / 10 THEN greatest(width / 2, interval '1 second')
                    WHEN slice_seen < max_rows / 40 THEN least(width * 2, interval '1 day')
                    ELSE width END;
    END LOOP;
    INSERT INTO skiplock.retention_sweeps AS w (seconds, swept_through, settings)
    VALUES (class_seconds, lo, fingerprint)
    ON CONFLICT (seconds) DO UPDATE SET swept_through = excluded.swept_through, settings = excluded.settings;
  END LOOP;
  -- Sweeps begun under other retentions (those still in force start over).
  DELETE FROM skiplock.retention_sweeps w WHERE w.settings <> fingerprint;
  RETURN deleted;
END
$$;

-- ---------------------------------------------------------------------------
-- Dead-letter queues
-- ---------------------------------------------------------------------------

-- A queue may name a dead-letter queue: a job of it that fails for good (its
-- attempts spent, a handler's PermanentError, a lease lost on its last
-- attempt) moves there, as SQS and Cloudflare Queues move a message, and
-- waits again with a fresh set of attempts: what `redrive` with `toQueue`
-- does, at the moment the job fails. Its history keeps the failure, and a
-- `retried` event that says so ({"deadLetter": true, "fromQueue": ...}).
-- A job moves once: failing for good again, in the dead-letter queue or back
-- in its own after a redrive, it stays failed there (so two queues that
-- name each other do not pass a job back and forth). A job with a
-- concurrency, ordering or rate key stays failed in its queue: its key's
-- slots and order are settled where it failed.
ALTER TABLE skiplock.queues ADD COLUMN dead_letter_queue text
  CONSTRAINT queues_dead_letter_queue_another CHECK (dead_letter_queue <> name AND length(dead_letter_queue) BETWEEN 1 AND 128);

-- Runs for failed jobs only (the trigger's WHEN), so a completion pays
-- nothing; a failure pays a lookup of its queue's row. Row triggers run
-- before the statement triggers that release key slots and resolve links,
-- which read the failure from their transition tables as before.
CREATE FUNCTION skiplock.to_dead_letter_queue() RETURNS trigger
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
    DELETE FROM skiplock.finished_jobs f WHERE f.id = NEW.id AND f.finished_at = NEW.finished_at RETURNING f.*
  ),
  back AS (
    INSERT INTO skiplock.jobs AS j
      (id, queue, type, tenant, state, priority, run_at, attempts, max_attempts, lease_seconds,
       backoff_base_seconds, backoff_max_seconds, expires_at, dedup_key, dedup_window_seconds, created_at,
       first_started_at, started_at, worker_id, payload, progress, last_error, callback_url, failure_callback_url, run_ms,
       tags)
    SELECT id, target, type, tenant, 'queued', priority, now(), 0, max_attempts, lease_seconds,
           backoff_base_seconds, backoff_max_seconds, NULL, dedup_key, dedup_window_seconds, created_at,
           first_started_at, started_at, NULL, payload, progress, last_error, callback_url, failure_callback_url, run_ms,
           tags
    FROM gone
    RETURNING j.id
  )
  INSERT INTO skiplock.job_events (job_id, kind, attempt, detail)
  SELECT b.id, 'retried', 0, jsonb_build_object('deadLetter', true, 'fromQueue', NEW.queue) FROM back b;
  RETURN NULL;
END
$$;

CREATE TRIGGER finished_jobs_to_dead_letter_queue
  AFTER INSERT ON skiplock.finished_jobs
  FOR EACH ROW WHEN (NEW.state = 'failed')
  EXECUTE FUNCTION skiplock.to_dead_letter_queue();
