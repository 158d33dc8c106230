-- Finished jobs deleted in one place, with every row that names them.
--
-- The retention sweep (skiplock.sweep_finished_jobs) and the bulk delete
-- (src/engine/bulk-delete.ts) each deleted a finished job's rows in other
-- tables with statements of their own, and the sweep, like the dropped days,
-- left the job's key row (skiplock.keyed_jobs, kept after a job ends so a
-- retry takes its key again) behind for good. Both now call
-- skiplock.delete_finished_jobs, and the days dropped and the default
-- partition's stray rows delete what hangs off their jobs with the same
-- skiplock.delete_job_history.

-- The rows that hang off jobs that are gone (or are about to be dropped
-- with their day): their events, durable steps, the links they waited on
-- (a link to one of them from a job still kept is that job's), their key's
-- row and their trace context. A job's wait for an event ends when the job
-- does, so it has none left.
CREATE FUNCTION skiplock.delete_job_history(ids uuid[]) RETURNS void
LANGUAGE sql AS $$
  DELETE FROM skiplock.job_events e WHERE e.job_id = ANY (ids);
  DELETE FROM skiplock.job_steps s WHERE s.job_id = ANY (ids);
  DELETE FROM skiplock.job_links l WHERE l.job_id = ANY (ids);
  DELETE FROM skiplock.keyed_jobs k WHERE k.job_id = ANY (ids);
  DELETE FROM skiplock.job_trace_contexts t WHERE t.job_id = ANY (ids);
$$;

-- Deletes the finished jobs given by id and finish time (which finds each
-- one's day), with their history and the dedup key each still holds, which
-- an enqueue may then take; answers how many it deleted. Only the rows it
-- deleted lose their history: a job a retry moved back to the live jobs
-- meanwhile keeps its own. Which jobs may go is the caller's: the sweep
-- keeps a job whose dedup key still matches, a bulk delete frees the key.
CREATE FUNCTION skiplock.delete_finished_jobs(ids uuid[], finished_ats timestamptz[]) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  gone uuid[];
BEGIN
  WITH deleted AS (
    DELETE FROM skiplock.finished_jobs f USING unnest(ids, finished_ats) AS d(id, finished_at)
    WHERE f.id = d.id AND f.finished_at = d.finished_at
    RETURNING f.id, f.tenant, f.queue, f.dedup_key
  ),
  keys AS (
    DELETE FROM skiplock.dedup_keys k USING deleted g
    WHERE (k.tenant, k.queue, k.dedup_key) = (g.tenant, g.queue, g.dedup_key) AND k.job_id = g.id
  )
  SELECT array_agg(g.id) INTO gone FROM deleted g;
  IF gone IS NULL THEN
    RETURN 0;
  END IF;
  PERFORM skiplock.delete_job_history(gone);
  RETURN cardinality(gone);
END
$$;

-- 0012's function, whose dropped days and stray rows of the default
-- partition take all of their jobs' history (skiplock.delete_job_history).
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
  stray uuid[];
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
      EXECUTE format('SELECT skiplock.delete_job_history(ARRAY(SELECT f.id FROM skiplock.%I f))', partition_name);
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
    )
    SELECT array_agg(g.id) INTO stray FROM gone g;
    deleted := coalesce(cardinality(stray), 0);
    PERFORM skiplock.delete_job_history(stray);
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

-- 0012's function, which deletes each slice's jobs with
-- skiplock.delete_finished_jobs.
CREATE OR REPLACE FUNCTION skiplock.sweep_finished_jobs(retention interval, longest interval, max_rows integer)
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
        )
        SELECT (SELECT count(*) FROM slice), skiplock.delete_finished_jobs(array_agg(d.id), array_agg(d.finished_at))
        INTO slice_seen, slice_deleted FROM doomed d;
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
