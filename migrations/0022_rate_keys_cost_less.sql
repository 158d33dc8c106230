-- skiplock 0022: rate keys cost the claim and the completion less.
--
-- With a rate key on every job, a claim and a completion each did a few
-- statements' work per batch that changed nothing:
-- - the claim (skiplock.admit_rate_limited) read each job's key twice, and
--   ran the statement that holds the jobs a full window turns away (and
--   fires the jobs table's statement triggers) when it held none;
-- - the completion (skiplock.release_key_slots) wrote the row of each key
--   of an ended job, and filled each key's turns (skiplock.fill_key_slots,
--   whose statements fire the triggers of the jobs and the history), though
--   a rate key's started job ending gives back no turn: its start stays in
--   the window.
-- Each is now skipped when there is nothing to do; what a key admits, holds
-- and records is unchanged, under the same locks in the same order.

-- 0008's admit_rate_limited. The locked jobs' keys and turns are read once,
-- by the statement that locks the keys: a locked job's turn cannot change
-- meanwhile (giving it one locks its row, which this claim holds). The
-- window's room is counted once per key, and the jobs are held (with their
-- events) only when some are.
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
BEGIN
  -- Their keys' rows are locked in key order, and the start time read
  -- after: every start a key records committed before it, so the window
  -- counted is the one the starts fall in.
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
    FOR UPDATE OF c
  )
  SELECT array_agg(d.address), array_agg(d.position), array_agg(d.id), array_agg(d.tenant), array_agg(d.key),
         array_agg(d.slot), (SELECT array_agg(l.tenant ORDER BY l.tenant, l.key) FROM locked_keys l),
         (SELECT array_agg(l.key ORDER BY l.tenant, l.key) FROM locked_keys l)
  INTO job_addresses, job_positions, job_ids, job_tenants, job_keys, job_slots, key_tenants, key_names
  FROM rated d;
  IF job_ids IS NULL THEN
    admitted := locked_rows;
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
  IF held_addresses IS NULL THEN
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
  WHERE r.address <> ALL (held_addresses);
END
$$;

-- 0008's end trigger. A key's row is written only when an ended job gave
-- back a turn or holds its key, and a rate key's turns are filled only when
-- an ended job gave one back: a started job's start stays in the window, so
-- its end leaves the key's room as it was (the key's held jobs get turns
-- when its window has room, through its refill_at).
CREATE OR REPLACE FUNCTION skiplock.release_key_slots() RETURNS trigger
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_nestloop = on
SET enable_mergejoin = on
-- Off: keyed_jobs is mostly ended jobs' rows, and its live ones are found
-- through their partial indexes, never by reading the table.
SET enable_seqscan = off
SET enable_bitmapscan = on
AS $$
DECLARE
  key_tenants text[];
  key_names text[];
  freed integer[];
  failed_heads uuid[];
  -- Whether any key gets a turn back or is held by its failed head.
  changed boolean;
  -- The keys whose turns may have changed: all but the rate keys that got none back.
  fill_tenants text[];
  fill_names text[];
BEGIN
  IF NOT EXISTS (SELECT 1 FROM skiplock.keyed_jobs kj WHERE kj.slot IN ('taken', 'started', 'waiting')) THEN
    RETURN NULL;
  END IF;
  -- A job's slot cannot change under this: giving it a turn locks its row,
  -- which the statement that ended it holds.
  SELECT array_agg(e.tenant ORDER BY e.tenant, e.key), array_agg(e.key ORDER BY e.tenant, e.key),
         array_agg(e.freed ORDER BY e.tenant, e.key), array_agg(e.failed_head ORDER BY e.tenant, e.key),
         array_agg(e.tenant ORDER BY e.tenant, e.key) FILTER (WHERE e.freed > 0 OR NOT e.rated),
         array_agg(e.key ORDER BY e.tenant, e.key) FILTER (WHERE e.freed > 0 OR NOT e.rated),
         bool_or(e.freed > 0 OR e.failed_head IS NOT NULL)
  INTO key_tenants, key_names, freed, failed_heads, fill_tenants, fill_names, changed
  FROM (
    SELECT kj.tenant, kj.key, count(*) FILTER (WHERE kj.slot = 'taken')::integer AS freed,
           (array_agg(kj.job_id ORDER BY kj.job_id)
              FILTER (WHERE kj.slot = 'taken' AND f.state IN ('failed', 'expired')))[1] AS failed_head,
           bool_and(kj.rate_limit IS NOT NULL) AS rated
    FROM finished f JOIN skiplock.keyed_jobs kj ON kj.job_id = f.id
    WHERE kj.slot IN ('taken', 'started', 'waiting')
    GROUP BY kj.tenant, kj.key
  ) e;
  IF key_tenants IS NULL THEN
    RETURN NULL;
  END IF;
  PERFORM 1 FROM skiplock.concurrency_keys c
  JOIN unnest(key_tenants, key_names) AS u(tenant, key) ON c.tenant = u.tenant AND c.key = u.key
  ORDER BY c.tenant, c.key
  FOR UPDATE OF c;
  IF changed THEN
    UPDATE skiplock.concurrency_keys c
    SET taken = c.taken - u.freed,
        blocked_by = CASE WHEN c.ordered AND c.on_failure = 'hold' AND u.failed_head IS NOT NULL
                          THEN u.failed_head ELSE c.blocked_by END,
        blocked_at = CASE WHEN c.ordered AND c.on_failure = 'hold' AND u.failed_head IS NOT NULL
                          THEN now() ELSE c.blocked_at END
    FROM unnest(key_tenants, key_names, freed, failed_heads) AS u(tenant, key, freed, failed_head)
    WHERE c.tenant = u.tenant AND c.key = u.key AND (u.freed > 0 OR u.failed_head IS NOT NULL);
  END IF;
  UPDATE skiplock.keyed_jobs kj SET slot = 'released'
  FROM finished f WHERE kj.job_id = f.id AND kj.slot IN ('taken', 'started', 'waiting');
  IF fill_tenants IS NOT NULL THEN
    PERFORM skiplock.fill_key_slots(fill_tenants, fill_names);
  END IF;
  PERFORM skiplock.drop_idle_keys(key_tenants, key_names);
  RETURN NULL;
END
$$;
