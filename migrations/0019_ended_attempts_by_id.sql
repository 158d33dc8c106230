-- The failed attempts' queue and tenant looked up by job id, one index probe
-- per attempt, in place of a join with the whole of skiplock.all_jobs.
--
-- The join let the planner scan every live and finished job for an hour's
-- attempts, and, with a tenant's filter on it (a tenant-bound key's
-- GET /v1/stats/timings), run that scan once per attempt of another tenant:
-- tens of seconds after 10,000 failed attempts. A lookup by id costs the
-- same whatever the history's size and whoever asks.
CREATE OR REPLACE FUNCTION skiplock.ended_attempts(since timestamptz, until timestamptz)
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
  CROSS JOIN LATERAL (
    SELECT j.queue, j.tenant FROM skiplock.jobs j WHERE j.id = e.job_id
    UNION ALL
    SELECT h.queue, h.tenant FROM skiplock.finished_jobs h WHERE h.id = e.job_id
    LIMIT 1
  ) a
  WHERE e.at >= since AND e.at < until AND e.kind IN ('failed', 'cancelled') AND e.detail ? 'runMs'
$$;
