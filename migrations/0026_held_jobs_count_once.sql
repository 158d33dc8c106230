-- skiplock 0026: what keyed jobs cost each statement.
--
-- Only a change that makes a job waiting counts as one.
--
-- jobs_waiting_again counted every update that left a job anything but
-- running: a job held behind its key or parked counted too, though neither
-- is in the waiting index, and each counted row cost its own trigger call.
-- A keyed job held at its enqueue and given its turn later paid two. The
-- trigger now counts only updates that leave a job waiting (scheduled,
-- queued or retrying) from a state other than held; the one statement that
-- gives held jobs their turn (skiplock.fill_key_slots) counts once for all
-- it turned. Counting after the update rather than before it is as safe:
-- the lock is held until commit, and a claim keeps a hint only while the
-- counter reads the same after its probe.

DROP TRIGGER jobs_waiting_again ON skiplock.jobs;
CREATE TRIGGER jobs_waiting_again
  BEFORE UPDATE ON skiplock.jobs
  FOR EACH ROW
  WHEN (NEW.state IN ('scheduled', 'queued', 'retrying') AND OLD.state <> 'held')
  EXECUTE FUNCTION skiplock.on_job_waiting_again();

-- 0008's counts of a rate window, in plpgsql. A SQL function that reads
-- FROM is never inlined, and every statement that called one parsed and
-- planned its body again; plpgsql keeps the plan for the session.
CREATE OR REPLACE FUNCTION skiplock.window_starts(starts timestamptz[], seconds integer, at timestamptz) RETURNS integer
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  RETURN (SELECT count(*)::integer FROM unnest(starts) s WHERE s > at - make_interval(secs => seconds));
END
$$;

CREATE OR REPLACE FUNCTION skiplock.window_opens_at(starts timestamptz[], seconds integer, at timestamptz) RETURNS timestamptz
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  RETURN (SELECT min(s) + make_interval(secs => seconds) FROM unnest(starts) s
          WHERE s > at - make_interval(secs => seconds));
END
$$;

-- 0008's fill_key_slots, counting the jobs it turns as one change.
CREATE OR REPLACE FUNCTION skiplock.fill_key_slots(key_tenants text[], key_names text[]) RETURNS void
LANGUAGE plpgsql
-- Planned once per connection: planning its statements afresh for each
-- call's arrays cost more than running them.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
  turned integer;
  rated boolean;
BEGIN
  WITH keys AS MATERIALIZED (
    SELECT c.tenant, c.key, c.ordered, c.rate_limit IS NOT NULL AS rated,
           CASE WHEN c.rate_limit IS NULL THEN c.slots - c.taken
                ELSE c.rate_limit - c.taken - skiplock.window_starts(c.starts, c.rate_seconds, now()) END AS free
    FROM unnest(key_tenants, key_names) AS u(tenant, key)
    JOIN skiplock.concurrency_keys c ON c.tenant = u.tenant AND c.key = u.key
    WHERE c.blocked_by IS NULL
  ),
  turn AS MATERIALIZED (
    SELECT k.tenant, k.key, k.ordered, t.job_id FROM keys k CROSS JOIN LATERAL (
      SELECT kj.job_id FROM skiplock.keyed_jobs kj
      WHERE kj.tenant = k.tenant AND kj.key = k.key AND (kj.slot IS NULL OR kj.slot = 'waiting')
      ORDER BY kj.job_id LIMIT k.free) t
    WHERE k.free > 0
  ),
  locked AS MATERIALIZED (
    SELECT j.id FROM skiplock.jobs j WHERE j.id IN (SELECT t.job_id FROM turn t) FOR UPDATE OF j SKIP LOCKED
  ),
  granted AS MATERIALIZED (
    SELECT t.tenant, t.key, t.job_id FROM turn t
    WHERE t.job_id IN (SELECT l.id FROM locked l)
      AND NOT (t.ordered AND EXISTS (SELECT 1 FROM turn s WHERE s.tenant = t.tenant AND s.key = t.key
                                     AND s.job_id < t.job_id AND s.job_id NOT IN (SELECT l.id FROM locked l)))
  ),
  taken AS (
    UPDATE skiplock.keyed_jobs kj SET slot = 'taken' FROM granted g WHERE kj.job_id = g.job_id
  ),
  counted AS (
    UPDATE skiplock.concurrency_keys c SET taken = c.taken + g.n
    FROM (SELECT g.tenant, g.key, count(*)::integer AS n FROM granted g GROUP BY 1, 2) g
    WHERE c.tenant = g.tenant AND c.key = g.key
  ),
  -- No event of its own: the job's next claim is what its history shows.
  woken AS (
    UPDATE skiplock.jobs j SET state = CASE WHEN j.run_at > now() THEN 'scheduled' ELSE 'queued' END
    FROM granted g WHERE j.id = g.job_id AND j.state = 'held'
    RETURNING j.id
  )
  SELECT count(*), (SELECT coalesce(bool_or(k.rated), false) FROM keys k) INTO turned, rated FROM woken;
  IF turned > 0 THEN
    -- Once for every job turned: jobs_waiting_again leaves held jobs to this.
    PERFORM skiplock.note_waiting_change();
    IF skiplock.anyone_listening() THEN
      PERFORM pg_notify('skiplock_jobs', '');
    END IF;
  END IF;

  -- The just-inserted jobs of a 'drop' key without a turn end cancelled,
  -- saying why, as a cancel would end them.
  IF rated THEN
    WITH dropped AS (
      UPDATE skiplock.keyed_jobs kj SET slot = 'released'
      FROM unnest(key_tenants, key_names) AS u(tenant, key)
      JOIN skiplock.concurrency_keys c ON c.tenant = u.tenant AND c.key = u.key
      WHERE kj.tenant = u.tenant AND kj.key = u.key AND kj.slot IS NULL AND c.rate_mode = 'drop'
      RETURNING kj.job_id, format('its key %s was at its rate limit (%s starts in %s s)', c.key, c.rate_limit,
                                  c.rate_seconds) AS reason
    ),
    ended AS (
      DELETE FROM skiplock.jobs j USING dropped d WHERE j.id = d.job_id
      RETURNING skiplock.as_finished(j, 'cancelled', NULL,
                  jsonb_build_object('name', 'RateLimitedError', 'message', d.reason)) AS finished, d.reason
    ),
    finished AS (
      INSERT INTO skiplock.finished_jobs SELECT (e.finished).* FROM ended e
    )
    INSERT INTO skiplock.job_events (job_id, kind, attempt, detail)
    SELECT (e.finished).id, 'cancelled', 0, jsonb_build_object('reason', e.reason) FROM ended e;
  END IF;

  -- The just-inserted jobs without a turn wait for one, held.
  WITH held AS (
    UPDATE skiplock.keyed_jobs kj SET slot = 'waiting'
    FROM unnest(key_tenants, key_names) AS u(tenant, key)
    WHERE kj.tenant = u.tenant AND kj.key = u.key AND kj.slot IS NULL
    RETURNING kj.job_id, kj.tenant, kj.key
  ),
  moved AS (
    UPDATE skiplock.jobs j SET state = 'held' FROM held h WHERE j.id = h.job_id
    RETURNING j.id, j.attempts, h.tenant, h.key
  )
  INSERT INTO skiplock.job_events (job_id, kind, attempt, detail)
  SELECT m.id, 'held', m.attempts,
         jsonb_build_object('key', m.key, 'blockedBy', c.blocked_by,
                            'reason', CASE WHEN c.blocked_by IS NOT NULL THEN 'its key is held by a failed job'
                                           WHEN c.ordered THEN 'behind its key''s earlier jobs'
                                           WHEN c.rate_limit IS NOT NULL
                                             THEN format('its key is at its rate limit (%s starts in %s s)',
                                                         c.rate_limit, c.rate_seconds)
                                           ELSE 'its key has no free slot' END)
  FROM moved m JOIN skiplock.concurrency_keys c ON c.tenant = m.tenant AND c.key = m.key;

  -- A rate key with jobs held comes due when its window next has room.
  IF NOT rated THEN
    RETURN;
  END IF;
  UPDATE skiplock.concurrency_keys c
  SET refill_at = skiplock.window_opens_at(c.starts, c.rate_seconds, now())
  FROM unnest(key_tenants, key_names) AS u(tenant, key)
  WHERE c.tenant = u.tenant AND c.key = u.key AND c.rate_limit IS NOT NULL AND c.blocked_by IS NULL
    AND EXISTS (SELECT 1 FROM skiplock.keyed_jobs kj WHERE kj.tenant = c.tenant AND kj.key = c.key AND kj.slot = 'waiting')
    AND c.refill_at IS DISTINCT FROM skiplock.window_opens_at(c.starts, c.rate_seconds, now());
END
$$;
