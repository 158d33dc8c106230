-- skiplock 0025: a claim skips the jobs whose rate key another transaction holds.
--
-- A claim locked the rows of its jobs' rate keys in key order and waited
-- for each one held elsewhere: by another claim of the same keys, by a
-- completion of their jobs, or by an enqueue's transaction until it
-- committed. Claims out at once took turns on those rows, and one that
-- made a rate key's visit first (skiplock.refill_rate_keys, which keeps the
-- due keys it locks) could wait for a key another claim held while that
-- claim waited for one of its own: a deadlock, ending one of them with an
-- error. The claim now locks the keys it can and leaves the jobs of the
-- others waiting for a later claim, as it skips locked jobs; what it starts
-- is counted as before, under the key's lock.

-- 0022's admit_rate_limited, skipping the keys held elsewhere.
CREATE OR REPLACE FUNCTION skiplock.admit_rate_limited(locked_rows tid[], OUT admitted tid[], OUT claimed_at timestamptz)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
  -- The locked jobs of rate keys: their address, place in the claim, id,
  -- key and turn.
  job_addresses tid[];
  job_positions bigint[];
  job_ids uuid[];
  job_tenants text[];
  job_keys text[];
  job_slots text[];
  -- Those the window has no room for: their address, key and its limit.
  held_addresses tid[];
  held_keys text[];
  held_limits integer[];
  held_seconds integer[];
  -- Their keys, locked.
  key_tenants text[];
  key_names text[];
  -- The locked jobs whose key another transaction holds: not started now.
  skipped_addresses tid[];
BEGIN
  -- Their keys' rows are locked, skipping those another transaction holds
  -- (a claim or a completion of the same key, or an enqueue not yet
  -- committed): their jobs stay waiting for a later claim, so a claim never
  -- waits for a key, and two claims cannot each hold a key the other waits
  -- for. The start time is read after the locks: every start a locked key
  -- records committed before it, so the window counted is the one the
  -- starts fall in.
  WITH rated AS MATERIALIZED (
    SELECT r.address, r.position, j.id, kj.tenant, kj.key, kj.slot
    FROM unnest(locked_rows) WITH ORDINALITY AS r(address, position)
    JOIN skiplock.jobs j ON j.ctid = r.address
    JOIN skiplock.keyed_jobs kj ON kj.job_id = j.id
    WHERE kj.rate_limit IS NOT NULL
  ),
  locked_keys AS MATERIALIZED (
    SELECT c.tenant, c.key FROM skiplock.concurrency_keys c
    JOIN (SELECT DISTINCT d.tenant, d.key FROM rated d) u ON c.tenant = u.tenant AND c.key = u.key
    ORDER BY c.tenant, c.key
    FOR UPDATE OF c SKIP LOCKED
  ),
  sorted AS MATERIALIZED (
    SELECT d.*, EXISTS (SELECT 1 FROM locked_keys l WHERE l.tenant = d.tenant AND l.key = d.key) AS key_locked
    FROM rated d
  )
  SELECT array_agg(d.address) FILTER (WHERE d.key_locked), array_agg(d.position) FILTER (WHERE d.key_locked),
         array_agg(d.id) FILTER (WHERE d.key_locked), array_agg(d.tenant) FILTER (WHERE d.key_locked),
         array_agg(d.key) FILTER (WHERE d.key_locked), array_agg(d.slot) FILTER (WHERE d.key_locked),
         array_agg(d.address) FILTER (WHERE NOT d.key_locked),
         (SELECT array_agg(l.tenant ORDER BY l.tenant, l.key) FROM locked_keys l),
         (SELECT array_agg(l.key ORDER BY l.tenant, l.key) FROM locked_keys l)
  INTO job_addresses, job_positions, job_ids, job_tenants, job_keys, job_slots, skipped_addresses, key_tenants,
       key_names
  FROM sorted d;
  IF job_ids IS NULL THEN
    SELECT array_agg(r.address ORDER BY r.position) INTO admitted
    FROM unnest(locked_rows) WITH ORDINALITY AS r(address, position)
    WHERE skipped_addresses IS NULL OR r.address <> ALL (skipped_addresses);
    claimed_at := clock_timestamp();
    RETURN;
  END IF;
  claimed_at := clock_timestamp();

  WITH keys AS MATERIALIZED (
    SELECT c.tenant, c.key, c.rate_limit, c.rate_seconds,
           c.rate_limit - (SELECT count(*) FROM unnest(c.starts) s
                           WHERE s > claimed_at - make_interval(secs => c.rate_seconds))::integer AS room
    FROM unnest(key_tenants, key_names) AS u(tenant, key)
    JOIN skiplock.concurrency_keys c ON c.tenant = u.tenant AND c.key = u.key
  ),
  judged AS MATERIALIZED (
    SELECT u.address, u.id, u.tenant, u.key, u.slot, k.rate_limit, k.rate_seconds,
           row_number() OVER (PARTITION BY u.tenant, u.key ORDER BY u.position) <= k.room AS admit
    FROM unnest(job_addresses, job_positions, job_ids, job_tenants, job_keys, job_slots)
           AS u(address, position, id, tenant, key, slot)
    JOIN keys k ON k.tenant = u.tenant AND k.key = u.key
  ),
  counted AS (
    UPDATE skiplock.concurrency_keys c
    SET starts = coalesce((SELECT array_agg(s ORDER BY s) FROM unnest(c.starts) s
                           WHERE s > claimed_at - make_interval(secs => c.rate_seconds)), '{}')
                 || array_fill(claimed_at, ARRAY[n.admitted]),
        taken = c.taken - n.had_turns,
        -- Held jobs, the ones just held among them, wait for the window's next room.
        refill_at = CASE WHEN n.held > 0 OR EXISTS (SELECT 1 FROM skiplock.keyed_jobs kj
                                                   WHERE kj.tenant = c.tenant AND kj.key = c.key AND kj.slot = 'waiting')
                         THEN least(c.refill_at, skiplock.window_opens_at(
                                c.starts || array_fill(claimed_at, ARRAY[n.admitted]), c.rate_seconds, claimed_at))
                         ELSE c.refill_at END
    FROM (SELECT d.tenant, d.key, count(*) FILTER (WHERE d.admit)::integer AS admitted,
                 count(*) FILTER (WHERE NOT d.admit)::integer AS held,
                 count(*) FILTER (WHERE d.slot = 'taken')::integer AS had_turns
          FROM judged d GROUP BY d.tenant, d.key) n
    WHERE c.tenant = n.tenant AND c.key = n.key
  ),
  started AS (
    UPDATE skiplock.keyed_jobs kj SET slot = CASE WHEN d.admit THEN 'started' ELSE 'waiting' END
    FROM judged d WHERE kj.job_id = d.id AND (NOT d.admit OR d.slot <> 'started')
  )
  SELECT array_agg(d.address), array_agg(d.key), array_agg(d.rate_limit), array_agg(d.rate_seconds)
  INTO held_addresses, held_keys, held_limits, held_seconds
  FROM judged d WHERE NOT d.admit;
  IF held_addresses IS NULL AND skipped_addresses IS NULL THEN
    admitted := locked_rows;
    RETURN;
  END IF;

  WITH held AS (
    UPDATE skiplock.jobs j SET state = 'held'
    FROM unnest(held_addresses, held_keys, held_limits, held_seconds) AS h(address, key, rate_limit, rate_seconds)
    WHERE j.ctid = h.address
    RETURNING j.id, j.attempts, h.key, h.rate_limit, h.rate_seconds
  )
  INSERT INTO skiplock.job_events (job_id, kind, attempt, detail)
  SELECT h.id, 'held', h.attempts,
         jsonb_build_object('key', h.key, 'blockedBy', NULL,
                            'reason', format('its key is at its rate limit (%s starts in %s s)', h.rate_limit,
                                             h.rate_seconds))
  FROM held h;
  SELECT array_agg(r.address ORDER BY r.position) INTO admitted
  FROM unnest(locked_rows) WITH ORDINALITY AS r(address, position)
  WHERE (held_addresses IS NULL OR r.address <> ALL (held_addresses))
    AND (skipped_addresses IS NULL OR r.address <> ALL (skipped_addresses));
END
$$;

