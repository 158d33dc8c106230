-- Two housekeeping calls may meet making the days ahead (at midnight UTC,
-- or from two drains): one making a day's partition locks the default
-- partition, which the other reads (is the day already there?) and prunes.
-- Both now wait under the lock timeout's handler, as the creation does, and
-- leave the work to the next call rather than fail the whole call.

CREATE OR REPLACE FUNCTION skiplock.maintain_finished_jobs(retention interval, days_ahead integer DEFAULT 2)
RETURNS TABLE (created integer, dropped integer, deleted integer)
LANGUAGE plpgsql
SET lock_timeout = '100ms'
AS $$
DECLARE
  today date := (now() AT TIME ZONE 'UTC')::date;
  -- Past the retention, and summed by the statistics' rollup.
  prune_before timestamptz := least(now() - retention, (SELECT rolled_through FROM skiplock.attempt_stats_rollup));
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

  -- Events whose keep has passed, once a day with the day's history (a
  -- send drops those of its own name as it goes).
  IF dropped > 0 THEN
    DELETE FROM skiplock.events e WHERE e.expires_at <= now();
  END IF;
  RETURN NEXT;
END
$$;
