-- Prometheus metrics (GET /metrics): an `operator` scope for the keys that
-- scrape them, and a count of the live jobs per tenant, queue and state kept
-- as the jobs change, so a scrape reads a few hundred rows however many jobs
-- wait (counting a million jobs takes a scan of the table, some 300 ms).

ALTER TABLE skiplock.api_keys DROP CONSTRAINT api_keys_scopes_known;
ALTER TABLE skiplock.api_keys ADD CONSTRAINT api_keys_scopes_known CHECK (
  cardinality(scopes) >= 1 AND scopes <@ ARRAY['admin', 'enqueue', 'read', 'worker', 'events', 'operator']::text[]);

-- A ledger of changes, not one row per group: each statement that changes
-- jobs appends its net changes, so writers never wait for one another on a
-- counter row (nor deadlock over two of them). The live count of a group is
-- the sum of its rows; housekeeping folds them back into one row per group
-- (skiplock.compact_job_counts).
CREATE TABLE skiplock.job_counts (
  tenant text   NOT NULL,
  queue  text   NOT NULL,
  state  text   NOT NULL,
  jobs   bigint NOT NULL
);

-- One trigger function for the three statement triggers; only the branch of
-- the firing operation reads a transition table, so the others need not
-- declare theirs. An update that changes no job's tenant, queue or state (a
-- heartbeat, a progress report) nets to nothing and appends nothing.
CREATE FUNCTION skiplock.count_job_changes() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO skiplock.job_counts (tenant, queue, state, jobs)
    SELECT a.tenant, a.queue, a.state, count(*) FROM added a GROUP BY 1, 2, 3;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO skiplock.job_counts (tenant, queue, state, jobs)
    SELECT r.tenant, r.queue, r.state, -count(*) FROM removed r GROUP BY 1, 2, 3;
  ELSIF TG_OP = 'UPDATE' THEN
    INSERT INTO skiplock.job_counts (tenant, queue, state, jobs)
    SELECT c.tenant, c.queue, c.state, sum(c.n)
    FROM (SELECT a.tenant, a.queue, a.state, 1 AS n FROM added a
          UNION ALL
          SELECT r.tenant, r.queue, r.state, -1 FROM removed r) AS c
    GROUP BY 1, 2, 3
    HAVING sum(c.n) <> 0;
  ELSE -- TRUNCATE
    DELETE FROM skiplock.job_counts;
  END IF;
  RETURN NULL;
END
$$;

-- Creating the triggers waits for the transactions writing jobs and holds
-- off new ones until this migration commits, so the count below sees every
-- job that the triggers do not.
CREATE TRIGGER jobs_counted_insert AFTER INSERT ON skiplock.jobs
  REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION skiplock.count_job_changes();
CREATE TRIGGER jobs_counted_update AFTER UPDATE ON skiplock.jobs
  REFERENCING OLD TABLE AS removed NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION skiplock.count_job_changes();
CREATE TRIGGER jobs_counted_delete AFTER DELETE ON skiplock.jobs
  REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION skiplock.count_job_changes();
CREATE TRIGGER jobs_counted_truncate AFTER TRUNCATE ON skiplock.jobs
  FOR EACH STATEMENT EXECUTE FUNCTION skiplock.count_job_changes();

INSERT INTO skiplock.job_counts (tenant, queue, state, jobs)
SELECT tenant, queue, state, count(*) FROM skiplock.jobs GROUP BY 1, 2, 3;

-- Folds the ledger into one row per group, dropping groups at zero. The
-- rows deleted are those this statement sees; rows appended meanwhile stay
-- for the next call, so two calls at once never count a change twice.
CREATE FUNCTION skiplock.compact_job_counts() RETURNS TABLE (rows_before bigint, rows_after bigint)
LANGUAGE sql AS $$
  WITH folded AS (
    DELETE FROM skiplock.job_counts RETURNING tenant, queue, state, jobs
  ),
  kept AS (
    INSERT INTO skiplock.job_counts (tenant, queue, state, jobs)
    SELECT tenant, queue, state, sum(jobs) FROM folded GROUP BY 1, 2, 3 HAVING sum(jobs) <> 0
    RETURNING 1
  )
  SELECT (SELECT count(*) FROM folded), (SELECT count(*) FROM kept)
$$;

-- What a Prometheus scrape reads, per queue and tenant (one tenant's when
-- given): the live jobs by state from the ledger; how long the oldest ready
-- job has waited, from the first entry of each priority in jobs_waiting_idx
-- (a few index probes per queue, however many jobs wait); and the attempts
-- that ended, from the daily statistics and the hour not yet rolled up, with
-- their summed wait and run histograms. The attempts not rolled up yet are
-- read as skiplock.ended_attempts reads them, but each failure finds its
-- job by id: joined through skiplock.all_jobs (a union, whose ids the
-- planner cannot count) the planner reads every job instead, 300 ms and
-- more at a million waiting. Planned for the time the rollup has reached (a
-- custom plan each call), so the history's newest rows are counted right.
-- jit is off, as for the queue's other statements that a deep backlog makes
-- the planner overrate.
CREATE FUNCTION skiplock.queue_metrics(only_tenant text)
RETURNS TABLE (queue text, tenant text, waiting bigint, running bigint, parked bigint, held bigint,
               oldest_waiting_seconds double precision, succeeded bigint, failed bigint,
               wait_ms_histogram jsonb, run_ms_histogram jsonb)
LANGUAGE plpgsql STABLE
SET jit = off
SET plan_cache_mode = force_custom_plan
AS $$
#variable_conflict use_column
DECLARE
  since timestamptz := (SELECT r.rolled_through FROM skiplock.attempt_stats_rollup r);
BEGIN
  RETURN QUERY
  WITH counts AS (
    SELECT c.tenant, c.queue,
           coalesce(sum(c.jobs) FILTER (WHERE c.state IN ('scheduled', 'queued', 'retrying')), 0) AS waiting,
           coalesce(sum(c.jobs) FILTER (WHERE c.state = 'running'), 0) AS running,
           coalesce(sum(c.jobs) FILTER (WHERE c.state = 'parked'), 0) AS parked,
           coalesce(sum(c.jobs) FILTER (WHERE c.state = 'held'), 0) AS held
    FROM skiplock.job_counts c
    WHERE only_tenant IS NULL OR c.tenant = only_tenant
    GROUP BY 1, 2
  ),
  oldest AS (
    SELECT c.tenant, c.queue, extract(epoch FROM now() - min(first.run_at)) AS seconds
    FROM counts c
    CROSS JOIN LATERAL (
      WITH RECURSIVE priorities AS (
        (SELECT -j.priority AS rank, j.run_at FROM skiplock.jobs j
         WHERE j.tenant = c.tenant AND j.queue = c.queue AND j.state IN ('scheduled', 'queued', 'retrying')
         ORDER BY -j.priority, j.run_at LIMIT 1)
        UNION ALL
        SELECT n.rank, n.run_at FROM priorities p CROSS JOIN LATERAL (
          SELECT -j.priority AS rank, j.run_at FROM skiplock.jobs j
          WHERE j.tenant = c.tenant AND j.queue = c.queue AND j.state IN ('scheduled', 'queued', 'retrying')
            AND -j.priority > p.rank
          ORDER BY -j.priority, j.run_at LIMIT 1) n
      )
      SELECT run_at FROM priorities
    ) first
    WHERE c.waiting > 0 AND first.run_at <= now()
    GROUP BY 1, 2
  ),
  recent AS (
    SELECT f.tenant, f.queue, true AS succeeded,
           greatest(0, skiplock.ms_between(f.run_at, f.started_at)) AS wait_ms,
           skiplock.ms_between(f.started_at, f.finished_at) AS run_ms
    FROM skiplock.finished_jobs f
    WHERE f.finished_at >= since AND f.state = 'succeeded' AND (only_tenant IS NULL OR f.tenant = only_tenant)
    UNION ALL
    SELECT job.tenant, job.queue, false, (e.detail->>'waitMs')::bigint, (e.detail->>'runMs')::bigint
    FROM skiplock.job_events e
    CROSS JOIN LATERAL (
      SELECT j.tenant, j.queue FROM skiplock.jobs j WHERE j.id = e.job_id
      UNION ALL
      SELECT h.tenant, h.queue FROM skiplock.finished_jobs h WHERE h.id = e.job_id
      LIMIT 1
    ) job
    WHERE e.at >= since AND e.kind IN ('failed', 'cancelled') AND e.detail ? 'runMs'
      AND (only_tenant IS NULL OR job.tenant = only_tenant)
  ),
  -- skiplock.histogram_bucket's buckets by the least whole ms in each (ms >= 1):
  -- a binary search per attempt instead of a numeric logarithm, ten times
  -- faster, and the same bucket for every whole number of ms.
  bounds AS (
    SELECT array_agg(ceil(2::numeric ^ ((b - 1) / 4.0))::bigint ORDER BY b) AS least_ms
    FROM generate_series(1, 127) AS b
  ),
  recent_buckets AS (
    SELECT r.tenant, r.queue, 'wait' AS measure,
           CASE WHEN r.wait_ms < 1 THEN 0 ELSE width_bucket(r.wait_ms, (SELECT least_ms FROM bounds)) END AS bucket,
           count(*) AS n
    FROM recent r WHERE r.wait_ms IS NOT NULL GROUP BY 1, 2, 3, 4
    UNION ALL
    SELECT r.tenant, r.queue, 'run',
           CASE WHEN r.run_ms < 1 THEN 0 ELSE width_bucket(r.run_ms, (SELECT least_ms FROM bounds)) END,
           count(*)
    FROM recent r WHERE r.run_ms IS NOT NULL GROUP BY 1, 2, 3, 4
  ),
  attempts AS (
    SELECT t.tenant, t.queue, sum(t.succeeded)::bigint AS succeeded, sum(t.failed)::bigint AS failed,
           skiplock.histogram_sum(t.wait_ms_histogram) AS wait_ms_histogram,
           skiplock.histogram_sum(t.run_ms_histogram) AS run_ms_histogram
    FROM (SELECT d.tenant, d.queue, d.succeeded, d.failed, d.wait_ms_histogram, d.run_ms_histogram
          FROM skiplock.daily_attempt_stats d
          WHERE only_tenant IS NULL OR d.tenant = only_tenant
          UNION ALL
          SELECT r.tenant, r.queue, count(*) FILTER (WHERE r.succeeded), count(*) FILTER (WHERE NOT r.succeeded),
                 (SELECT coalesce(jsonb_object_agg(b.bucket, b.n), '{}') FROM recent_buckets b
                  WHERE b.tenant = r.tenant AND b.queue = r.queue AND b.measure = 'wait'),
                 (SELECT coalesce(jsonb_object_agg(b.bucket, b.n), '{}') FROM recent_buckets b
                  WHERE b.tenant = r.tenant AND b.queue = r.queue AND b.measure = 'run')
          FROM recent r
          GROUP BY 1, 2) AS t
    GROUP BY 1, 2
  )
  SELECT coalesce(c.queue, a.queue), coalesce(c.tenant, a.tenant),
         coalesce(c.waiting, 0)::bigint, coalesce(c.running, 0)::bigint, coalesce(c.parked, 0)::bigint,
         coalesce(c.held, 0)::bigint, coalesce(o.seconds, 0)::float8,
         coalesce(a.succeeded, 0), coalesce(a.failed, 0),
         coalesce(a.wait_ms_histogram, '{}'), coalesce(a.run_ms_histogram, '{}')
  FROM counts c
  FULL JOIN attempts a ON a.tenant = c.tenant AND a.queue = c.queue
  LEFT JOIN oldest o ON o.tenant = c.tenant AND o.queue = c.queue
  ORDER BY 1, 2;
END
$$;
