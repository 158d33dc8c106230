-- Prometheus metrics (GET /metrics) that tell the endings apart: the
-- attempts started; of those that ended, which succeeded, failed and were
-- retried, failed for good, were cancelled while running, or were cut off by
-- a lapsed lease; and the jobs that expired before they started.
--
-- The attempts started are counted by the job counts' ledger (0009), as the
-- claims make jobs running: one more row in the statement the trigger
-- already runs. The endings are kept by the daily statistics, which gain a
-- column for each; days rolled up before this migration count their
-- retries and cancellations as failures, and no lease lapses or expiries.

-- failed still counts every failed attempt (retried, for good, or cancelled
-- while running); retried and cancelled say how many of them were which.
-- lease_expired (attempts cut off by a lapsed lease) and expired (jobs whose
-- expires_at passed before they started) have no times, so they are not in
-- attempts nor in the histograms.
ALTER TABLE skiplock.daily_attempt_stats
  ADD COLUMN retried       bigint NOT NULL DEFAULT 0,
  ADD COLUMN cancelled     bigint NOT NULL DEFAULT 0,
  ADD COLUMN lease_expired bigint NOT NULL DEFAULT 0,
  ADD COLUMN expired       bigint NOT NULL DEFAULT 0;

-- 0009's function; an UPDATE's net gain of running jobs also goes to the
-- group's 'started' row, which no job state has: only a claim makes jobs
-- running, and a claim makes none stop, so that gain is the attempts the
-- claim started. 'started' only grows, so compaction keeps it as one row;
-- a TRUNCATE of the jobs clears it with the rest.
CREATE OR REPLACE FUNCTION skiplock.count_job_changes() RETURNS trigger
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
    WITH net AS (
      SELECT c.tenant, c.queue, c.state, sum(c.n) AS jobs
      FROM (SELECT a.tenant, a.queue, a.state, 1 AS n FROM added a
            UNION ALL
            SELECT r.tenant, r.queue, r.state, -1 FROM removed r) AS c
      GROUP BY 1, 2, 3
      HAVING sum(c.n) <> 0
    )
    SELECT n.tenant, n.queue, n.state, n.jobs FROM net n
    UNION ALL
    SELECT n.tenant, n.queue, 'started', n.jobs FROM net n WHERE n.state = 'running' AND n.jobs > 0;
  ELSE -- TRUNCATE
    DELETE FROM skiplock.job_counts;
  END IF;
  RETURN NULL;
END
$$;

-- 0001's function, with each attempt's outcome: succeeded, retried, failed
-- (for good) or cancelled (while running). Its columns change, so it is
-- made again, and with it the functions that return its rows' shape.
DROP FUNCTION skiplock.queue_metrics(text);
DROP FUNCTION skiplock.attempt_stats(timestamptz, timestamptz);
DROP FUNCTION skiplock.ended_attempts(timestamptz, timestamptz);

-- What a failed attempt's event (skiplock.fail_jobs) says became of it:
-- cancelled, retried (it names the retry's time) or failed for good.
CREATE FUNCTION skiplock.failure_outcome(kind text, detail jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN kind = 'cancelled' THEN 'cancelled'
              WHEN detail->>'retryAt' IS NOT NULL THEN 'retried'
              ELSE 'failed' END
$$;

CREATE FUNCTION skiplock.ended_attempts(since timestamptz, until timestamptz)
RETURNS TABLE (ended_at timestamptz, queue text, tenant text, succeeded boolean, wait_ms bigint, run_ms bigint,
               outcome text)
LANGUAGE sql STABLE AS $$
  SELECT f.finished_at, f.queue, f.tenant, true,
         greatest(0, skiplock.ms_between(f.run_at, f.started_at)),
         skiplock.ms_between(f.started_at, f.finished_at), 'succeeded'
  FROM skiplock.finished_jobs f
  WHERE f.finished_at >= since AND f.finished_at < until AND f.state = 'succeeded'
  UNION ALL
  SELECT e.at, a.queue, a.tenant, false, (e.detail->>'waitMs')::bigint, (e.detail->>'runMs')::bigint,
         skiplock.failure_outcome(e.kind, e.detail)
  FROM skiplock.job_events e
  JOIN skiplock.all_jobs a ON a.id = e.job_id
  WHERE e.at >= since AND e.at < until AND e.kind IN ('failed', 'cancelled') AND e.detail ? 'runMs'
$$;

-- 0001's function, with the failures' outcomes counted, and the attempts
-- cut off by a lapsed lease and the jobs that expired unstarted (neither
-- has times, so neither is in attempts or the histograms). A day of a
-- queue with only those has empty histograms.
CREATE FUNCTION skiplock.attempt_stats(since timestamptz, until timestamptz)
RETURNS TABLE (day date, queue text, tenant text, attempts bigint, succeeded bigint, failed bigint,
               wait_ms_histogram jsonb, run_ms_histogram jsonb,
               retried bigint, cancelled bigint, lease_expired bigint, expired bigint)
LANGUAGE sql STABLE AS $$
  WITH attempt AS (
    SELECT (a.ended_at AT TIME ZONE 'UTC')::date AS day, a.queue, a.tenant, a.outcome, a.wait_ms, a.run_ms
    FROM skiplock.ended_attempts(since, until) a
  ),
  untimed AS (
    SELECT (e.at AT TIME ZONE 'UTC')::date AS day, a.queue, a.tenant, 'lease_expired' AS outcome
    FROM skiplock.job_events e
    JOIN skiplock.all_jobs a ON a.id = e.job_id
    WHERE e.at >= since AND e.at < until AND e.kind = 'lease_expired'
    UNION ALL
    SELECT (f.finished_at AT TIME ZONE 'UTC')::date, f.queue, f.tenant, 'expired'
    FROM skiplock.finished_jobs f
    WHERE f.finished_at >= since AND f.finished_at < until AND f.state = 'expired'
  ),
  per_bucket AS (
    SELECT day, queue, tenant, 'wait' AS measure, skiplock.histogram_bucket(wait_ms) AS bucket, count(*) AS n
    FROM attempt WHERE wait_ms IS NOT NULL GROUP BY 1, 2, 3, 4, 5
    UNION ALL
    SELECT day, queue, tenant, 'run', skiplock.histogram_bucket(run_ms), count(*)
    FROM attempt WHERE run_ms IS NOT NULL GROUP BY 1, 2, 3, 4, 5
  ),
  histograms AS (
    SELECT day, queue, tenant,
           coalesce(jsonb_object_agg(bucket, n ORDER BY bucket) FILTER (WHERE measure = 'wait'), '{}') AS wait_ms_histogram,
           coalesce(jsonb_object_agg(bucket, n ORDER BY bucket) FILTER (WHERE measure = 'run'), '{}') AS run_ms_histogram
    FROM per_bucket GROUP BY day, queue, tenant
  ),
  counts AS (
    SELECT day, queue, tenant,
           count(*) FILTER (WHERE outcome IN ('succeeded', 'retried', 'failed', 'cancelled')) AS attempts,
           count(*) FILTER (WHERE outcome = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE outcome IN ('retried', 'failed', 'cancelled')) AS failed,
           count(*) FILTER (WHERE outcome = 'retried') AS retried,
           count(*) FILTER (WHERE outcome = 'cancelled') AS cancelled,
           count(*) FILTER (WHERE outcome = 'lease_expired') AS lease_expired,
           count(*) FILTER (WHERE outcome = 'expired') AS expired
    FROM (SELECT day, queue, tenant, outcome FROM attempt UNION ALL SELECT * FROM untimed) AS ended
    GROUP BY day, queue, tenant
  )
  SELECT c.day, c.queue, c.tenant, c.attempts, c.succeeded, c.failed,
         coalesce(h.wait_ms_histogram, '{}'), coalesce(h.run_ms_histogram, '{}'),
         c.retried, c.cancelled, c.lease_expired, c.expired
  FROM counts c LEFT JOIN histograms h USING (day, queue, tenant)
$$;

-- 0001's function, adding the new columns on conflict.
CREATE OR REPLACE FUNCTION skiplock.roll_up_attempt_stats(keep interval, max_span interval DEFAULT interval '7 days')
RETURNS TABLE (rolled_through timestamptz, rows_written integer, rows_dropped integer)
LANGUAGE plpgsql AS $$
DECLARE
  due timestamptz := date_trunc('hour', now() - interval '5 minutes', 'UTC');
  since timestamptz;
  upto timestamptz;
BEGIN
  rows_written := 0; rows_dropped := 0;
  SELECT r.rolled_through INTO since FROM skiplock.attempt_stats_rollup r;
  IF since >= due THEN
    rolled_through := since;
    RETURN NEXT;
    RETURN;
  END IF;
  SELECT r.rolled_through INTO since FROM skiplock.attempt_stats_rollup r FOR UPDATE SKIP LOCKED;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  upto := least(due, since + max_span);
  IF upto > since THEN
    INSERT INTO skiplock.daily_attempt_stats AS d
    SELECT * FROM skiplock.attempt_stats(since, upto)
    ON CONFLICT (day, queue, tenant) DO UPDATE SET
      attempts = d.attempts + excluded.attempts,
      succeeded = d.succeeded + excluded.succeeded,
      failed = d.failed + excluded.failed,
      wait_ms_histogram = skiplock.histogram_add(d.wait_ms_histogram, excluded.wait_ms_histogram),
      run_ms_histogram = skiplock.histogram_add(d.run_ms_histogram, excluded.run_ms_histogram),
      retried = d.retried + excluded.retried,
      cancelled = d.cancelled + excluded.cancelled,
      lease_expired = d.lease_expired + excluded.lease_expired,
      expired = d.expired + excluded.expired;
    GET DIAGNOSTICS rows_written = ROW_COUNT;
    UPDATE skiplock.attempt_stats_rollup SET rolled_through = upto;
    since := upto;
    DELETE FROM skiplock.daily_attempt_stats WHERE day < ((now() - keep) AT TIME ZONE 'UTC')::date;
    GET DIAGNOSTICS rows_dropped = ROW_COUNT;
  END IF;
  rolled_through := since;
  RETURN NEXT;
END
$$;

-- 0009's function, with the attempts started (the ledger's 'started'
-- rows), the endings told apart as the statistics now keep them (failed:
-- for good only), and, unless asked for one tenant, the queue's delivery
-- target and the time the statistics are rolled up through (the same on
-- every row: how far housekeeping has got), which are the deployment's, not
-- a tenant's. The hour not rolled up yet also reads its lease lapses (events,
-- each finding its job by id) and expiries (history rows).
CREATE FUNCTION skiplock.queue_metrics(only_tenant text)
RETURNS TABLE (queue text, tenant text, waiting bigint, running bigint, parked bigint, held bigint,
               oldest_waiting_seconds double precision, started bigint, succeeded bigint, retried bigint,
               failed bigint, cancelled bigint, lease_expired bigint, expired bigint,
               wait_ms_histogram jsonb, run_ms_histogram jsonb, delivery_target text,
               stats_rolled_through timestamptz)
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
           coalesce(sum(c.jobs) FILTER (WHERE c.state = 'held'), 0) AS held,
           coalesce(sum(c.jobs) FILTER (WHERE c.state = 'started'), 0) AS started
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
    SELECT f.tenant, f.queue, f.state AS outcome,
           CASE WHEN f.state = 'succeeded' THEN greatest(0, skiplock.ms_between(f.run_at, f.started_at)) END AS wait_ms,
           CASE WHEN f.state = 'succeeded' THEN skiplock.ms_between(f.started_at, f.finished_at) END AS run_ms
    FROM skiplock.finished_jobs f
    WHERE f.finished_at >= since AND f.state IN ('succeeded', 'expired')
      AND (only_tenant IS NULL OR f.tenant = only_tenant)
    UNION ALL
    SELECT job.tenant, job.queue,
           CASE WHEN e.kind = 'lease_expired' THEN 'lease_expired' ELSE skiplock.failure_outcome(e.kind, e.detail) END,
           (e.detail->>'waitMs')::bigint, (e.detail->>'runMs')::bigint
    FROM skiplock.job_events e
    CROSS JOIN LATERAL (
      SELECT j.tenant, j.queue FROM skiplock.jobs j WHERE j.id = e.job_id
      UNION ALL
      SELECT h.tenant, h.queue FROM skiplock.finished_jobs h WHERE h.id = e.job_id
      LIMIT 1
    ) job
    WHERE e.at >= since
      AND ((e.kind IN ('failed', 'cancelled') AND e.detail ? 'runMs') OR e.kind = 'lease_expired')
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
    SELECT t.tenant, t.queue, sum(t.succeeded)::bigint AS succeeded, sum(t.retried)::bigint AS retried,
           sum(t.failed - t.retried - t.cancelled)::bigint AS failed, sum(t.cancelled)::bigint AS cancelled,
           sum(t.lease_expired)::bigint AS lease_expired, sum(t.expired)::bigint AS expired,
           skiplock.histogram_sum(t.wait_ms_histogram) AS wait_ms_histogram,
           skiplock.histogram_sum(t.run_ms_histogram) AS run_ms_histogram
    FROM (SELECT d.tenant, d.queue, d.succeeded, d.failed, d.retried, d.cancelled, d.lease_expired, d.expired,
                 d.wait_ms_histogram, d.run_ms_histogram
          FROM skiplock.daily_attempt_stats d
          WHERE only_tenant IS NULL OR d.tenant = only_tenant
          UNION ALL
          SELECT r.tenant, r.queue, count(*) FILTER (WHERE r.outcome = 'succeeded'),
                 count(*) FILTER (WHERE r.outcome IN ('retried', 'failed', 'cancelled')),
                 count(*) FILTER (WHERE r.outcome = 'retried'), count(*) FILTER (WHERE r.outcome = 'cancelled'),
                 count(*) FILTER (WHERE r.outcome = 'lease_expired'), count(*) FILTER (WHERE r.outcome = 'expired'),
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
         coalesce(c.held, 0)::bigint, coalesce(o.seconds, 0)::float8, coalesce(c.started, 0)::bigint,
         coalesce(a.succeeded, 0), coalesce(a.retried, 0), coalesce(a.failed, 0), coalesce(a.cancelled, 0),
         coalesce(a.lease_expired, 0), coalesce(a.expired, 0),
         coalesce(a.wait_ms_histogram, '{}'), coalesce(a.run_ms_histogram, '{}'),
         CASE WHEN only_tenant IS NULL THEN q.delivery->>'target' END,
         CASE WHEN only_tenant IS NULL THEN since END
  FROM counts c
  FULL JOIN attempts a ON a.tenant = c.tenant AND a.queue = c.queue
  LEFT JOIN oldest o ON o.tenant = c.tenant AND o.queue = c.queue
  LEFT JOIN skiplock.queues q ON q.name = coalesce(c.queue, a.queue)
  ORDER BY 1, 2;
END
$$;
