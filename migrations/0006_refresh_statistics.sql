-- The claim's plan rests on the statistics of skiplock.jobs, and a queue
-- table changes wholesale faster than autovacuum looks (once a minute by
-- default). Without statistics, on a fresh table of 100,000 waiting jobs, the
-- planner sorts every waiting job on each claim instead of reading the
-- waiting index in order. Housekeeping calls this: it analyzes the table
-- when it was never analyzed yet holds more than a few pages (a database
-- copied from a template starts with no change counted), or when it has seen
-- more changes than it holds rows since its last analysis; it skips the
-- table while another analysis runs, and where the role may not analyze it
-- (not the owner), so that role's server log gets no warning every round.
CREATE FUNCTION skiplock.refresh_statistics() RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  stale boolean;
BEGIN
  SELECT ((c.reltuples < 0 AND pg_relation_size(c.oid) > 16 * current_setting('block_size')::bigint)
          OR s.n_mod_since_analyze > greatest(1000, c.reltuples))
         AND pg_has_role(c.relowner, 'USAGE')
    INTO stale
    FROM pg_stat_user_tables s
    JOIN pg_class c ON c.oid = s.relid
   WHERE s.relid = 'skiplock.jobs'::regclass;
  IF stale THEN
    ANALYZE (SKIP_LOCKED) skiplock.jobs;
  END IF;
  RETURN coalesce(stale, false);
END
$$;
