-- skiplock 0008: keys with a rate limit.
--
-- A job may name a rate key (an API account, a store): at most `rate_limit`
-- jobs of the key start in any `rate_seconds` seconds, counting every
-- attempt's start, however many claimers claim at once. The excess either
-- waits, held, for the window to have room ('throttle'), or, at enqueue,
-- ends cancelled with the reason ('drop').
--
-- Exact where it must be, cheap where it can be:
-- - The claim decides. Of the jobs a claim locked, those of rate keys start
--   only while their key's window has room (skiplock.admit_rate_limited),
--   under the key's row lock, at a start time read after that lock: the
--   starts a key records are in commit order, so no two claimers can both
--   take its last place. A claim with no rate key in use pays one probe.
-- - The turns keep the claim's work small: as with concurrency keys, a rate
--   key's jobs beyond what its window can start are `held`, outside every
--   state a claim looks at, and the key's `refill_at` says when its window
--   next has room; the claim's first step (skiplock.refill_rate_keys) gives
--   turns to the keys whose time has come. A job given a turn is counted
--   against the window until it starts (`taken`), so turns never exceed the
--   window; a retry after a failed attempt needs none and is checked by the
--   claim like every start.

-- ---------------------------------------------------------------------------
-- A started job of a rate key that retries after a failed attempt is held
-- again when its key's window is full.
-- ---------------------------------------------------------------------------

CREATE OR REPLACE FUNCTION skiplock.is_legal_transition(from_state text, to_state text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  RETURN (from_state, to_state) IN (
    ('scheduled', 'running'), ('queued', 'running'), ('retrying', 'running'),
    ('running', 'scheduled'), ('running', 'queued'), ('running', 'retrying'),
    ('scheduled', 'queued'), ('queued', 'scheduled'), ('retrying', 'queued'), ('retrying', 'scheduled'),
    ('running', 'parked'), ('scheduled', 'parked'), ('parked', 'scheduled'), ('parked', 'queued'),
    ('queued', 'held'), ('scheduled', 'held'), ('retrying', 'held'), ('held', 'queued'), ('held', 'scheduled'));
END
$$;

-- ---------------------------------------------------------------------------
-- Rate keys
-- ---------------------------------------------------------------------------

-- A key is a concurrency key (slots), an ordering key (one slot, in order)
-- or a rate key (rate_limit starts per rate_seconds, no slots). For a rate
-- key, `taken` counts the jobs given a turn that have not started yet, and
-- `starts` holds its starts within its latest window, oldest first (at most
-- rate_limit of them).
ALTER TABLE skiplock.concurrency_keys
  ALTER COLUMN slots DROP NOT NULL,
  ADD COLUMN rate_limit   integer,
  ADD COLUMN rate_seconds integer,
  -- 'throttle': the excess waits, held, for room in the window; 'drop': a
  -- job enqueued while the window has no room ends cancelled.
  ADD COLUMN rate_mode    text,
  ADD COLUMN starts       timestamptz[] NOT NULL DEFAULT '{}',
  -- When the key's window next has room for its held jobs (or, with none
  -- left, when its last start leaves the window and the key can go).
  ADD COLUMN refill_at    timestamptz,
  ADD CONSTRAINT concurrency_keys_rate_whole
    CHECK ((rate_limit IS NULL) = (rate_seconds IS NULL) AND (rate_limit IS NULL) = (rate_mode IS NULL)),
  ADD CONSTRAINT concurrency_keys_slots_or_rate CHECK ((slots IS NULL) <> (rate_limit IS NULL)),
  ADD CONSTRAINT concurrency_keys_rate_range CHECK (rate_limit BETWEEN 1 AND 10000 AND rate_seconds BETWEEN 1 AND 86400),
  ADD CONSTRAINT concurrency_keys_rate_mode_known CHECK (rate_mode IN ('throttle', 'drop'));
-- The claim's probe for rate keys in use, and the refill's for keys due.
CREATE INDEX concurrency_keys_rate_idx ON skiplock.concurrency_keys (tenant, key) WHERE rate_limit IS NOT NULL;
CREATE INDEX concurrency_keys_refill_idx ON skiplock.concurrency_keys (refill_at) WHERE refill_at IS NOT NULL;

-- A rate key's job, once it has started, is 'started' until it ends: its
-- retries need no turn, and the claim checks each of its starts.
ALTER TABLE skiplock.keyed_jobs
  ALTER COLUMN slots DROP NOT NULL,
  ADD COLUMN rate_limit   integer,
  ADD COLUMN rate_seconds integer,
  ADD COLUMN rate_mode    text,
  ADD CONSTRAINT keyed_jobs_rate_whole
    CHECK ((rate_limit IS NULL) = (rate_seconds IS NULL) AND (rate_limit IS NULL) = (rate_mode IS NULL)),
  ADD CONSTRAINT keyed_jobs_slots_or_rate CHECK ((slots IS NULL) <> (rate_limit IS NULL)),
  ADD CONSTRAINT keyed_jobs_rate_range CHECK (rate_limit BETWEEN 1 AND 10000 AND rate_seconds BETWEEN 1 AND 86400),
  ADD CONSTRAINT keyed_jobs_rate_mode_known CHECK (rate_mode IN ('throttle', 'drop')),
  DROP CONSTRAINT keyed_jobs_slot_known,
  ADD CONSTRAINT keyed_jobs_slot_known CHECK (slot IN ('taken', 'started', 'waiting', 'released'));
DROP INDEX skiplock.keyed_jobs_live_idx;
CREATE INDEX keyed_jobs_live_idx ON skiplock.keyed_jobs (job_id) WHERE slot IN ('taken', 'started', 'waiting');
-- A rate key's started jobs, which keep the key (their retries are counted against it).
CREATE INDEX keyed_jobs_started_idx ON skiplock.keyed_jobs (tenant, key) WHERE slot = 'started';

-- How many of a rate key's starts fall in the window that ends at `at`.
CREATE FUNCTION skiplock.window_starts(starts timestamptz[], seconds integer, at timestamptz) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT count(*)::integer FROM unnest(starts) s WHERE s > at - make_interval(secs => seconds)
$$;

-- When a rate key's window next has room: its oldest start in the window
-- leaves it (null when the window is empty).
CREATE FUNCTION skiplock.window_opens_at(starts timestamptz[], seconds integer, at timestamptz) RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT min(s) + make_interval(secs => seconds) FROM unnest(starts) s WHERE s > at - make_interval(secs => seconds)
$$;

-- 0006's fill_key_slots, for rate keys too: a rate key's free turns are
-- its limit less its starts in the window and its turns not started yet;
-- its just-inserted jobs left over are held ('throttle', until the key's
-- refill_at) or end cancelled ('drop').
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
  IF turned > 0 AND skiplock.anyone_listening() THEN
    PERFORM pg_notify('skiplock_jobs', '');
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

-- A key with nothing left (no turn taken, no job held or started, not
-- held by a failed head) is dropped; its next job makes it again. A rate
-- key stays until its last start has left its window, which its next job
-- must count: it comes due then, and goes.
CREATE FUNCTION skiplock.drop_idle_keys(key_tenants text[], key_names text[]) RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
  WITH idle AS MATERIALIZED (
    SELECT c.tenant, c.key, skiplock.window_starts(c.starts, c.rate_seconds, now()) > 0 AS recent_starts
    FROM unnest(key_tenants, key_names) AS u(tenant, key)
    JOIN skiplock.concurrency_keys c ON c.tenant = u.tenant AND c.key = u.key
    WHERE c.taken = 0 AND c.blocked_by IS NULL
      AND NOT EXISTS (SELECT 1 FROM skiplock.keyed_jobs kj
                      WHERE kj.tenant = c.tenant AND kj.key = c.key AND kj.slot = 'waiting')
      AND NOT EXISTS (SELECT 1 FROM skiplock.keyed_jobs kj
                      WHERE kj.tenant = c.tenant AND kj.key = c.key AND kj.slot = 'started')
  ),
  dropped AS (
    DELETE FROM skiplock.concurrency_keys c USING idle i
    WHERE c.tenant = i.tenant AND c.key = i.key AND NOT coalesce(i.recent_starts, false)
  )
  UPDATE skiplock.concurrency_keys c SET refill_at = c.starts[cardinality(c.starts)] + make_interval(secs => c.rate_seconds)
  FROM idle i
  WHERE c.tenant = i.tenant AND c.key = i.key AND i.recent_starts AND c.refill_at IS NULL;
END
$$;

-- Rate keys whose time has come (their window has room for held jobs, or
-- their last start has left it) fill their turns, at most `max_keys` a
-- call, earliest first. Locked ones are being filled by whoever holds them.
-- A claim's first step, so it can take the jobs given turns.
CREATE FUNCTION skiplock.refill_rate_keys(max_keys integer DEFAULT 1000) RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
  key_tenants text[];
  key_names text[];
BEGIN
  IF NOT EXISTS (SELECT 1 FROM skiplock.concurrency_keys c WHERE c.refill_at <= now()) THEN
    RETURN;
  END IF;
  WITH due AS MATERIALIZED (
    SELECT c.tenant, c.key FROM skiplock.concurrency_keys c
    WHERE c.refill_at <= now()
    ORDER BY c.refill_at LIMIT max_keys
    FOR UPDATE SKIP LOCKED
  ),
  cleared AS (
    UPDATE skiplock.concurrency_keys c SET refill_at = NULL
    FROM due d WHERE c.tenant = d.tenant AND c.key = d.key
    RETURNING c.tenant, c.key
  )
  SELECT array_agg(r.tenant ORDER BY r.tenant, r.key), array_agg(r.key ORDER BY r.tenant, r.key)
  INTO key_tenants, key_names FROM cleared r;
  IF key_tenants IS NULL THEN
    RETURN;
  END IF;
  PERFORM skiplock.fill_key_slots(key_tenants, key_names);
  PERFORM skiplock.drop_idle_keys(key_tenants, key_names);
END
$$;

-- Of the jobs a claim locked (by address, in claim order), those of rate
-- keys start only while their key's window has room, in claim order; the
-- rest are held until it has. The keys' rows are locked first, in key
-- order, and the start time read after: every start a key records
-- committed before it, so the window counted is the one the starts fall in.
-- Returns the addresses to start, in order, and that start time.
CREATE FUNCTION skiplock.admit_rate_limited(locked_rows tid[], OUT admitted tid[], OUT claimed_at timestamptz)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
AS $$
DECLARE
  key_tenants text[];
  key_names text[];
BEGIN
  SELECT array_agg(k.tenant ORDER BY k.tenant, k.key), array_agg(k.key ORDER BY k.tenant, k.key)
  INTO key_tenants, key_names
  FROM (SELECT DISTINCT kj.tenant, kj.key
        FROM unnest(locked_rows) AS r(address)
        JOIN skiplock.jobs j ON j.ctid = r.address
        JOIN skiplock.keyed_jobs kj ON kj.job_id = j.id
        WHERE kj.rate_limit IS NOT NULL) k;
  IF key_tenants IS NULL THEN
    admitted := locked_rows;
    claimed_at := clock_timestamp();
    RETURN;
  END IF;
  PERFORM 1 FROM skiplock.concurrency_keys c
  JOIN unnest(key_tenants, key_names) AS u(tenant, key) ON c.tenant = u.tenant AND c.key = u.key
  ORDER BY c.tenant, c.key
  FOR UPDATE OF c;
  claimed_at := clock_timestamp();

  WITH judged AS MATERIALIZED (
    SELECT r.address, j.id, kj.tenant, kj.key, kj.slot, c.rate_limit, c.rate_seconds,
           row_number() OVER (PARTITION BY kj.tenant, kj.key ORDER BY r.position)
             <= c.rate_limit - skiplock.window_starts(c.starts, c.rate_seconds, claimed_at) AS admit
    FROM unnest(locked_rows) WITH ORDINALITY AS r(address, position)
    JOIN skiplock.jobs j ON j.ctid = r.address
    JOIN skiplock.keyed_jobs kj ON kj.job_id = j.id
    JOIN skiplock.concurrency_keys c ON c.tenant = kj.tenant AND c.key = kj.key
    WHERE kj.rate_limit IS NOT NULL
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
  ),
  held AS (
    UPDATE skiplock.jobs j SET state = 'held'
    FROM judged d WHERE j.ctid = d.address AND NOT d.admit
    RETURNING j.id, j.attempts, d.key, d.rate_limit, d.rate_seconds
  ),
  events AS (
    INSERT INTO skiplock.job_events (job_id, kind, attempt, detail)
    SELECT h.id, 'held', h.attempts,
           jsonb_build_object('key', h.key, 'blockedBy', NULL,
                              'reason', format('its key is at its rate limit (%s starts in %s s)', h.rate_limit,
                                               h.rate_seconds))
    FROM held h
  )
  SELECT array_agg(r.address ORDER BY r.position) INTO admitted
  FROM unnest(locked_rows) WITH ORDINALITY AS r(address, position)
  WHERE r.address NOT IN (SELECT d.address FROM judged d WHERE NOT d.admit);
END
$$;

-- 0006's insert trigger, for rate keys too. A key's settings are its latest
-- job's, within its kind: a job naming a key in use as another kind
-- (concurrency, ordering, rate) is refused by name.
CREATE OR REPLACE FUNCTION skiplock.take_key_slots() RETURNS trigger
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
  key_tenants text[];
  key_names text[];
  mixed record;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM skiplock.keyed_jobs kj WHERE kj.slot IS NULL) THEN
    RETURN NULL;
  END IF;
  WITH latest AS (
    SELECT DISTINCT ON (kj.tenant, kj.key) kj.tenant, kj.key, kj.ordered, kj.slots, kj.on_failure,
           kj.rate_limit, kj.rate_seconds, kj.rate_mode
    FROM skiplock.keyed_jobs kj WHERE kj.slot IS NULL
    ORDER BY kj.tenant, kj.key, kj.job_id DESC
  ),
  made AS (
    INSERT INTO skiplock.concurrency_keys AS c
      (tenant, key, ordered, slots, on_failure, rate_limit, rate_seconds, rate_mode)
    SELECT l.tenant, l.key, l.ordered, l.slots, l.on_failure, l.rate_limit, l.rate_seconds, l.rate_mode
    FROM latest l ORDER BY l.tenant, l.key
    ON CONFLICT (tenant, key) DO UPDATE
      SET slots = EXCLUDED.slots, on_failure = EXCLUDED.on_failure,
          rate_limit = EXCLUDED.rate_limit, rate_seconds = EXCLUDED.rate_seconds, rate_mode = EXCLUDED.rate_mode
      -- A key of another kind keeps its settings; the check below refuses the job.
      WHERE c.ordered = EXCLUDED.ordered AND (c.rate_limit IS NULL) = (EXCLUDED.rate_limit IS NULL)
    RETURNING c.tenant, c.key
  )
  SELECT array_agg(m.tenant ORDER BY m.tenant, m.key), array_agg(m.key ORDER BY m.tenant, m.key)
  INTO key_tenants, key_names FROM made m;

  SELECT kj.tenant, kj.key,
         CASE WHEN kj.ordered THEN 'ordering' WHEN kj.rate_limit IS NOT NULL THEN 'rate' ELSE 'concurrency' END AS asked,
         CASE WHEN c.ordered THEN 'an ordering' WHEN c.rate_limit IS NOT NULL THEN 'a rate' ELSE 'a concurrency' END AS in_use
  INTO mixed
  FROM skiplock.keyed_jobs kj JOIN skiplock.concurrency_keys c ON c.tenant = kj.tenant AND c.key = kj.key
  WHERE kj.slot IS NULL AND (c.ordered <> kj.ordered OR (c.rate_limit IS NULL) <> (kj.rate_limit IS NULL))
  LIMIT 1;
  IF FOUND THEN
    PERFORM skiplock.refuse(mixed.asked || '_key',
      format('%s is in use as %s key of tenant %s; a key is of one kind', mixed.key, mixed.in_use, mixed.tenant));
  END IF;

  -- A failed head that holds its key, run again, takes its turn back.
  UPDATE skiplock.concurrency_keys c SET blocked_by = NULL, blocked_at = NULL
  FROM unnest(key_tenants, key_names) AS u(tenant, key)
  WHERE c.tenant = u.tenant AND c.key = u.key AND c.blocked_by IS NOT NULL
    AND EXISTS (SELECT 1 FROM skiplock.keyed_jobs kj WHERE kj.job_id = c.blocked_by AND kj.slot IS NULL);

  PERFORM skiplock.fill_key_slots(key_tenants, key_names);
  RETURN NULL;
END
$$;

-- 0006's end trigger: a rate key's ended job gives back the turn it had not
-- started (a started one's start stays in the window), and a key with
-- nothing left goes (skiplock.drop_idle_keys).
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
  ended uuid[];
BEGIN
  IF NOT EXISTS (SELECT 1 FROM skiplock.keyed_jobs kj WHERE kj.slot IN ('taken', 'started', 'waiting')) THEN
    RETURN NULL;
  END IF;
  -- A job's slot cannot change under this: giving it a turn locks its row,
  -- which the statement that ended it holds.
  SELECT array_agg(f.id) INTO ended
  FROM finished f JOIN skiplock.keyed_jobs kj ON kj.job_id = f.id
  WHERE kj.slot IN ('taken', 'started', 'waiting');
  SELECT array_agg(e.tenant ORDER BY e.tenant, e.key), array_agg(e.key ORDER BY e.tenant, e.key),
         array_agg(e.freed ORDER BY e.tenant, e.key), array_agg(e.failed_head ORDER BY e.tenant, e.key)
  INTO key_tenants, key_names, freed, failed_heads
  FROM (
    SELECT kj.tenant, kj.key, count(*) FILTER (WHERE kj.slot = 'taken')::integer AS freed,
           (array_agg(kj.job_id ORDER BY kj.job_id)
              FILTER (WHERE kj.slot = 'taken' AND f.state IN ('failed', 'expired')))[1] AS failed_head
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
  UPDATE skiplock.concurrency_keys c
  SET taken = c.taken - u.freed,
      blocked_by = CASE WHEN c.ordered AND c.on_failure = 'hold' AND u.failed_head IS NOT NULL
                        THEN u.failed_head ELSE c.blocked_by END,
      blocked_at = CASE WHEN c.ordered AND c.on_failure = 'hold' AND u.failed_head IS NOT NULL
                        THEN now() ELSE c.blocked_at END
  FROM unnest(key_tenants, key_names, freed, failed_heads) AS u(tenant, key, freed, failed_head)
  WHERE c.tenant = u.tenant AND c.key = u.key;
  UPDATE skiplock.keyed_jobs kj SET slot = 'released' WHERE kj.job_id = ANY (ended);
  PERFORM skiplock.fill_key_slots(key_tenants, key_names);
  PERFORM skiplock.drop_idle_keys(key_tenants, key_names);
  RETURN NULL;
END
$$;

-- 0006's unblock_key, dropping the key through skiplock.drop_idle_keys.
CREATE OR REPLACE FUNCTION skiplock.unblock_key(tenant text, key text) RETURNS boolean
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  UPDATE skiplock.concurrency_keys c SET blocked_by = NULL, blocked_at = NULL
  WHERE c.tenant = unblock_key.tenant AND c.key = unblock_key.key AND c.blocked_by IS NOT NULL;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM skiplock.fill_key_slots(ARRAY[unblock_key.tenant], ARRAY[unblock_key.key]);
  PERFORM skiplock.drop_idle_keys(ARRAY[unblock_key.tenant], ARRAY[unblock_key.key]);
  RETURN true;
END
$$;

-- ---------------------------------------------------------------------------
-- The claim
-- ---------------------------------------------------------------------------

-- 0005's claim, with rate keys: its first steps give due rate keys' held
-- jobs their turns, and of the jobs it locked, those of rate keys start
-- only while their key's window has room (skiplock.admit_rate_limited).
CREATE OR REPLACE FUNCTION skiplock.claim_batch(
  max_jobs integer, lease_seconds integer, job_types text[], queues text[], only_tenant text, worker text,
  delivery_targets text[] DEFAULT NULL)
RETURNS SETOF skiplock.claimed_job
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_bitmapscan = off
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
  -- The first waiting job in index order: its tenant and queue, and its
  -- place in the waiting index, where the scans below start. A drain
  -- leaves the index entries of the jobs it claimed at the front of their
  -- queue until vacuum removes them; starting past them, every claim steps
  -- over them once (in this probe) instead of once per scan, and a claim
  -- that starts from its session's hint not at all.
  first_tenant text;
  first_queue text;
  first_rank smallint;
  first_run_at timestamptz;
  first_id uuid;
  -- The session's claim hint (see skiplock.waiting_changes): the counter's
  -- value it is good for, then the place of the first waiting job a probe
  -- found. Only a claim of all tenants keeps one.
  hint text[];
  -- The counter when the probe found the first job: what a hint made from
  -- it is good for (null: this probe makes none).
  hint_changes bigint;
  changes_after bigint;
  probe_started timestamptz;
  -- That queue's settings (skiplock.queues), if it has any.
  first_cap integer;
  first_delivery jsonb;
  first_paused boolean := false;
  more_waiting boolean := false;
  -- The delivery target of each claimed queue that has one, by queue name:
  -- returned with each of its jobs, so the claimer routes them by the
  -- setting it claimed them under.
  deliveries jsonb;
  -- The locked jobs to start, by address, in claim order.
  locked_rows tid[];
  -- The claim's fencing token, shared by the jobs it takes: a job's next
  -- claim gets another, and that is all fencing needs.
  token uuid := gen_random_uuid();
  -- When the claim started its jobs, one time for all of them, so its JSON
  -- form is written once rather than per job.
  claimed_at timestamptz;
  claimed_at_json json;
BEGIN
  -- Parked jobs whose time has come wait again first, so this claim can
  -- take them.
  PERFORM skiplock.wake_parked_jobs();
  -- Rate keys whose window has room again give their held jobs turns.
  PERFORM skiplock.refill_rate_keys();

  -- The first waiting job: one probe of the waiting index. From the
  -- session's hint when it has one: the counter, read after the probe's
  -- snapshot was taken, must still read what the hint is good for, or a
  -- change it did not see may have made a job waiting before that place.
  IF only_tenant IS NULL THEN
    hint := nullif(current_setting('skiplock.claim_hint', true), '')::text[];
  END IF;
  IF hint IS NOT NULL THEN
    SELECT j.tenant, j.queue, -j.priority, j.run_at, j.id, (SELECT c.last_value FROM skiplock.waiting_changes c)
    INTO first_tenant, first_queue, first_rank, first_run_at, first_id, changes_after FROM skiplock.jobs j
    WHERE (j.tenant, j.queue, -j.priority, j.run_at, j.id)
            >= (hint[2], hint[3], hint[4]::smallint, hint[5]::timestamptz, hint[6]::uuid)
      AND j.state IN ('scheduled', 'queued', 'retrying')
    ORDER BY j.tenant, j.queue, -j.priority, j.run_at, j.id
    LIMIT 1;
    IF changes_after = hint[1]::bigint THEN
      hint_changes := changes_after;
    ELSE
      -- Nothing past the hint is looked for from the front too, so that no
      -- mistake in keeping hints can leave a job waiting for good.
      first_tenant := NULL;
    END IF;
  END IF;

  IF first_tenant IS NULL THEN
    -- From the front. When this session's last walk from the front was slow
    -- (longer than skiplock.claim_hint_after_ms, default 1), this probe
    -- makes a hint, if no change that makes jobs waiting is in flight: each
    -- change the counter has counted then has committed, and the probe's
    -- snapshot, taken after, sees its jobs.
    IF only_tenant IS NULL AND current_setting('skiplock.claim_probe_slow', true) = 'on' THEN
      hint_changes := (SELECT c.last_value FROM skiplock.waiting_changes c);
      IF EXISTS (SELECT 1 FROM pg_locks l
                 WHERE l.locktype = 'advisory' AND l.classid = 1936419947 AND l.objid = 1 AND l.objsubid = 2
                   AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())) THEN
        hint_changes := NULL;
      END IF;
    END IF;
    probe_started := clock_timestamp();
    SELECT j.tenant, j.queue, -j.priority, j.run_at, j.id
    INTO first_tenant, first_queue, first_rank, first_run_at, first_id FROM skiplock.jobs j
    WHERE j.state IN ('scheduled', 'queued', 'retrying') AND (only_tenant IS NULL OR j.tenant = only_tenant)
    ORDER BY j.tenant, j.queue, -j.priority, j.run_at, j.id
    LIMIT 1;
    IF only_tenant IS NULL THEN
      PERFORM set_config('skiplock.claim_probe_slow',
        CASE WHEN clock_timestamp() - probe_started
                  >= make_interval(secs => coalesce(nullif(current_setting('skiplock.claim_hint_after_ms', true), '')::float8, 1) / 1000)
             THEN 'on' ELSE 'off' END, false);
    END IF;
  END IF;
  IF hint IS NOT NULL OR hint_changes IS NOT NULL THEN
    -- The time in JSON's form, which reads back the same whatever the
    -- session's DateStyle.
    PERFORM set_config('skiplock.claim_hint',
      CASE WHEN hint_changes IS NOT NULL AND first_tenant IS NOT NULL
           THEN ARRAY[hint_changes::text, first_tenant, first_queue, first_rank::text, to_json(first_run_at) #>> '{}',
                      first_id::text]::text
           ELSE '' END, false);
  END IF;
  -- None waiting is the idle case, and it ends here.
  IF first_tenant IS NULL THEN
    RETURN;
  END IF;

  -- Whether any other tenant or queue has waiting jobs, probed the same way
  -- (ordered by the whole index key, so the kept plan reads the index
  -- whatever the statistics say).
  SELECT true INTO more_waiting FROM skiplock.jobs j
  WHERE j.state IN ('scheduled', 'queued', 'retrying') AND (j.tenant, j.queue) > (first_tenant, first_queue)
    AND (only_tenant IS NULL OR j.tenant = only_tenant)
  ORDER BY j.tenant, j.queue, -j.priority, j.run_at, j.id
  LIMIT 1;

  SELECT q.concurrency, q.delivery, q.paused_at IS NOT NULL INTO first_cap, first_delivery, first_paused
  FROM skiplock.queues q WHERE q.name = first_queue;

  -- One queue of one tenant waiting, neither limited: nothing to share or
  -- count, so a plain SKIP LOCKED claim of its first jobs in claim order.
  IF NOT coalesce(more_waiting, false)
     AND first_cap IS NULL
     AND NOT EXISTS (SELECT 1 FROM skiplock.tenant_limits t
                     WHERE t.name = first_tenant AND (t.concurrency IS NOT NULL OR t.rate_count IS NOT NULL))
  THEN
    IF (queues IS NOT NULL AND NOT first_queue = ANY(queues))
       OR (first_delivery IS NOT NULL AND NOT coalesce(first_delivery->>'target' = ANY(delivery_targets), false))
       OR first_paused
    THEN
      RETURN;
    END IF;
    deliveries := CASE WHEN first_delivery IS NOT NULL THEN jsonb_build_object(first_queue, first_delivery) END;
    -- From the first job on, within its tenant and queue: the two row
    -- comparisons bound the index scan, so it starts past the entries the
    -- probe stepped over.
    SELECT array_agg(j.ctid ORDER BY j.rank, j.run_at, j.id)
    INTO locked_rows FROM (
      SELECT j.ctid, j.id, -j.priority AS rank, j.run_at FROM skiplock.jobs j
      WHERE (j.tenant, j.queue, -j.priority, j.run_at, j.id) >= (first_tenant, first_queue, first_rank, first_run_at, first_id)
        AND (j.tenant, j.queue) <= (first_tenant, first_queue)
        AND j.state IN ('scheduled', 'queued', 'retrying')
        AND j.run_at <= now()
        AND (j.expires_at IS NULL OR j.expires_at > now())
        AND (first_delivery IS NOT NULL OR job_types IS NULL OR j.type = ANY(job_types))
      ORDER BY j.tenant, j.queue, -j.priority, j.run_at, j.id
      LIMIT max_jobs
      FOR UPDATE SKIP LOCKED
    ) j;
  ELSE
    -- Several tenants or queues, or limits to keep:
    -- 1. `waiting_groups` walks the waiting index one (tenant, queue) at a
    --    time (a loose index scan), so its cost follows the number of queues
    --    with work, not the depth of the backlog. Its steps test only what
    --    the index holds and order by its whole key, which keeps the plan an
    --    ordered index scan whatever the statistics say.
    -- 2. `queue_load` and `capped` lock the capped queues among them (SKIP
    --    LOCKED) that have room, keeping those no other claim took jobs of
    --    since this statement's snapshot (claim_seq unchanged): their
    --    running counts, from that snapshot, cannot be low then, so a cap
    --    holds however many claimers run. Step 4 does the same for tenants.
    -- 3. `ready_groups` keeps the tenants' queues with a job this claim could
    --    take (ready, unexpired, of the asked types and queues, or of a
    --    queue whose delivery target it named, not at a cap), since the LIMITs below keep max_jobs tenants and must not
    --    spend them on tenants with nothing to give; `tenant_load` adds each
    --    tenant's limits and running jobs.
    -- 4. `limited` locks the tenants with a concurrency or rate limit, in
    --    fairness order, as step 2 the queues. Unlimited tenants and
    --    uncapped queues take no lock.
    -- 5. `picked` takes, per tenant and queue, its first jobs in claim order,
    --    as many as the tenant and the queue may start. `shared` orders each
    --    tenant's picks by (running in the queue + rank) / queue weight and
    --    keeps as many as the tenant may start; `chosen` orders all of them
    --    by (running in the tenant + rank) / tenant weight: weighted max-min
    --    fairness over running slots, among a tenant's queues and among
    --    tenants (a weight-3 tenant gets three turns per round), ties drawn
    --    at random so equals take turns across claims too. It keeps a capped
    --    queue's picks within its room, then max_jobs, materialized once.
    -- 6. `locked` locks the chosen rows (SKIP LOCKED, state checked again);
    --    `served` and `queue_served` book them on their limited tenants and
    --    capped queues, whose locks this transaction keeps until the jobs
    --    below are started and committed.
    WITH RECURSIVE waiting_groups(tenant, queue, rank, run_at, id) AS (
      SELECT first_tenant, first_queue, first_rank, first_run_at, first_id
      UNION ALL
      SELECT n.* FROM waiting_groups w CROSS JOIN LATERAL (
        SELECT j.tenant, j.queue, -j.priority, j.run_at, j.id FROM skiplock.jobs j
        WHERE j.state IN ('scheduled', 'queued', 'retrying') AND (j.tenant, j.queue) > (w.tenant, w.queue)
          AND (only_tenant IS NULL OR j.tenant = only_tenant)
        ORDER BY j.tenant, j.queue, -j.priority, j.run_at, j.id LIMIT 1) n
    ),
    queue_load AS MATERIALIZED (
      SELECT q.name, q.claim_seq, q.concurrency - (
               SELECT count(*) FROM skiplock.jobs r WHERE r.queue = q.name AND r.state = 'running') AS room
      FROM skiplock.queues q
      WHERE q.concurrency IS NOT NULL AND q.paused_at IS NULL
        AND q.name IN (SELECT w.queue FROM waiting_groups w)
        AND (queues IS NULL OR q.name = ANY(queues))
        AND (q.delivery IS NULL OR q.delivery->>'target' = ANY(delivery_targets))
    ),
    capped AS MATERIALIZED (
      SELECT q.name, q.claim_seq, l.claim_seq AS seen_seq, l.room FROM skiplock.queues q
      JOIN queue_load l ON l.name = q.name
      WHERE l.room > 0
      FOR UPDATE OF q SKIP LOCKED
    ),
    ready_groups AS MATERIALIZED (
      SELECT w.tenant, w.queue, w.rank, w.run_at, w.id, coalesce(q.weight, 1) AS weight, c.room AS queue_room, q.delivery
      FROM waiting_groups w
      LEFT JOIN skiplock.queues q ON q.name = w.queue
      LEFT JOIN capped c ON c.name = w.queue
      WHERE (queues IS NULL OR w.queue = ANY(queues))
        AND q.paused_at IS NULL
        AND (q.concurrency IS NULL OR c.claim_seq = c.seen_seq)
        AND (q.delivery IS NULL OR q.delivery->>'target' = ANY(delivery_targets))
        -- A scalar subquery ordered by the whole index key, so it stays a
        -- probe bounded by the group's key: an EXISTS the planner may make a
        -- semi-join that reads every ready entry of the index, which it does
        -- when the statistics say few jobs wait (most parked or running).
        AND (
          SELECT true FROM skiplock.jobs j
          WHERE (j.tenant, j.queue, -j.priority, j.run_at, j.id) >= (w.tenant, w.queue, w.rank, w.run_at, w.id)
            AND (j.tenant, j.queue) <= (w.tenant, w.queue) AND j.state IN ('scheduled', 'queued', 'retrying')
            AND j.run_at <= now() AND (j.expires_at IS NULL OR j.expires_at > now())
            AND (q.delivery IS NOT NULL OR job_types IS NULL OR j.type = ANY(job_types))
          ORDER BY j.tenant, j.queue, -j.priority, j.run_at, j.id
          LIMIT 1)
    ),
    tenant_load AS MATERIALIZED (
      SELECT g.tenant, g.queues, t.claim_seq, t.concurrency, t.rate_count, t.rate_per_seconds, t.weight,
             (SELECT count(*) FROM skiplock.jobs r WHERE r.tenant = g.tenant AND r.state = 'running') AS running,
             random() AS tiebreak
      FROM (SELECT tenant, count(*) AS queues FROM ready_groups GROUP BY tenant) g
      JOIN skiplock.tenant_limits t ON t.name = g.tenant
    ),
    limited AS MATERIALIZED (
      SELECT t.name, t.claim_seq, t.window_started_at, t.window_claims
      FROM skiplock.tenants t
      JOIN tenant_load l ON l.tenant = t.name
      WHERE (l.concurrency IS NOT NULL OR l.rate_count IS NOT NULL)
        AND (l.concurrency IS NULL OR l.running < l.concurrency)
      ORDER BY l.running::float8 / l.weight, l.tiebreak
      LIMIT max_jobs
      FOR UPDATE OF t SKIP LOCKED
    ),
    capacity AS MATERIALIZED (
      SELECT l.tenant, l.queues, l.weight, l.running, l.tiebreak,
             least(max_jobs,
                   coalesce(l.concurrency - l.running, max_jobs),
                   coalesce(l.rate_count - CASE
                     WHEN m.window_started_at > now() - make_interval(secs => l.rate_per_seconds)
                     THEN m.window_claims ELSE 0 END, max_jobs)) AS free
      FROM tenant_load l
      LEFT JOIN limited m ON m.name = l.tenant
      WHERE (l.concurrency IS NULL AND l.rate_count IS NULL)
         OR m.claim_seq = l.claim_seq
      ORDER BY l.running::float8 / l.weight, l.tiebreak
      LIMIT max_jobs
    ),
    picked AS MATERIALIZED (
      SELECT p.id, c.tenant, g.queue, g.queue_room, c.free, c.running, c.weight, c.tiebreak,
             (g.running + p.rank)::float8 / g.weight AS queue_turn, g.tiebreak AS queue_tiebreak, p.rank
      FROM capacity c
      CROSS JOIN LATERAL (
        -- A tenant's running jobs per queue matter only when it has several
        -- queues to share between.
        SELECT r.queue, r.rank, r.run_at, r.id, r.weight, r.queue_room, r.delivery, random() AS tiebreak,
               CASE WHEN c.queues > 1 THEN (
                 SELECT count(*) FROM skiplock.jobs x
                 WHERE x.tenant = r.tenant AND x.queue = r.queue AND x.state = 'running') ELSE 0 END AS running
        FROM ready_groups r WHERE r.tenant = c.tenant
      ) g
      CROSS JOIN LATERAL (
        SELECT j.id, row_number() OVER (ORDER BY j.tenant, j.queue, -j.priority, j.run_at, j.id) AS rank
        FROM skiplock.jobs j
        WHERE (j.tenant, j.queue, -j.priority, j.run_at, j.id) >= (c.tenant, g.queue, g.rank, g.run_at, g.id)
          AND (j.tenant, j.queue) <= (c.tenant, g.queue)
          AND j.state IN ('scheduled', 'queued', 'retrying')
          AND j.run_at <= now()
          AND (j.expires_at IS NULL OR j.expires_at > now())
          AND (g.delivery IS NOT NULL OR job_types IS NULL OR j.type = ANY(job_types))
        ORDER BY j.tenant, j.queue, -j.priority, j.run_at, j.id
        LIMIT least(c.free, g.queue_room)
      ) p
      WHERE c.free > 0
    ),
    shared AS MATERIALIZED (
      SELECT s.id, s.tenant, s.queue, s.queue_room, s.tiebreak,
             (s.running + s.tenant_rank)::float8 / s.weight AS turn, s.tenant_rank AS rank
      FROM (
        SELECT p.*, row_number() OVER (PARTITION BY p.tenant ORDER BY p.queue_turn, p.queue_tiebreak, p.rank) AS tenant_rank
        FROM picked p
      ) s
      WHERE s.tenant_rank <= s.free
    ),
    chosen AS MATERIALIZED (
      SELECT id, tenant, queue, row_number() OVER (ORDER BY turn, tiebreak, rank) AS position
      FROM (
        SELECT s.*, row_number() OVER (PARTITION BY s.queue ORDER BY s.turn, s.tiebreak, s.rank) AS queue_position
        FROM shared s
      ) s
      WHERE s.queue_room IS NULL OR s.queue_position <= s.queue_room
      ORDER BY turn, tiebreak, rank LIMIT max_jobs
    ),
    locked AS MATERIALIZED (
      -- One lookup by key per chosen job: a semi-join, or a list of keys
      -- beside the state condition, lets the planner read the whole waiting
      -- index. The state is tested as "neither running nor parked" (the
      -- live states left are the waiting ones, jobs_state_live), which the
      -- waiting index's predicate does not follow from: said as the waiting
      -- states, the planner may take that index for the lookup, reading all
      -- of it for one id, when the statistics say few jobs wait.
      SELECT l.ctid, chosen.id, chosen.tenant, chosen.queue, chosen.position FROM chosen CROSS JOIN LATERAL (
        SELECT j.ctid FROM skiplock.jobs j
        WHERE j.id = chosen.id AND j.state NOT IN ('running', 'parked')
        FOR UPDATE SKIP LOCKED
      ) l
    ),
    served AS (
      UPDATE skiplock.tenants t
      SET claim_seq = t.claim_seq + 1,
          window_started_at = CASE WHEN l.rate_count IS NULL THEN t.window_started_at
            WHEN t.window_started_at > now() - make_interval(secs => l.rate_per_seconds) THEN t.window_started_at
            ELSE now() END,
          window_claims = CASE WHEN l.rate_count IS NULL THEN 0
            WHEN t.window_started_at > now() - make_interval(secs => l.rate_per_seconds) THEN t.window_claims + n.claims
            ELSE n.claims END
      FROM (SELECT tenant, count(*)::integer AS claims FROM locked GROUP BY tenant) n
      JOIN tenant_load l ON l.tenant = n.tenant
      WHERE t.name = n.tenant AND t.name IN (SELECT name FROM limited)
    ),
    queue_served AS (
      UPDATE skiplock.queues q SET claim_seq = q.claim_seq + 1
      WHERE q.name IN (SELECT queue FROM locked) AND q.name IN (SELECT name FROM capped)
    )
    SELECT array_agg(ctid ORDER BY position),
           (SELECT jsonb_object_agg(d.queue, d.delivery)
            FROM (SELECT DISTINCT r.queue, r.delivery FROM ready_groups r WHERE r.delivery IS NOT NULL) d)
    INTO locked_rows, deliveries FROM locked;
  END IF;
  IF locked_rows IS NULL THEN
    RETURN;
  END IF;

  -- Start the locked jobs, by the row's address: each is locked, so it stays
  -- where the lock found it, and no index is searched again. Each comes back
  -- with its place in the claim's order.
  -- Jobs of rate keys start only while their key's window has room: one
  -- probe when no rate key is in use.
  IF EXISTS (SELECT 1 FROM skiplock.concurrency_keys c WHERE c.rate_limit IS NOT NULL) THEN
    SELECT a.admitted, a.claimed_at INTO locked_rows, claimed_at FROM skiplock.admit_rate_limited(locked_rows) a;
    IF locked_rows IS NULL THEN
      RETURN;
    END IF;
  ELSE
    claimed_at := clock_timestamp();
  END IF;
  claimed_at_json := to_json(claimed_at);
  RETURN QUERY
  UPDATE skiplock.jobs j
  SET state = 'running', attempts = j.attempts + 1, worker_id = worker,
      lease_token = token,
      lease_expires_at = now() + make_interval(secs => coalesce(claim_batch.lease_seconds, j.lease_seconds)),
      started_at = claimed_at, first_started_at = coalesce(j.first_started_at, claimed_at),
      cancel_requested_at = NULL
  FROM unnest(locked_rows) WITH ORDINALITY AS chosen(address, position)
  WHERE j.ctid = chosen.address
  RETURNING j.id, j.queue::text, j.type::text, j.tenant::text, j.priority::integer AS priority, j.payload,
            j.attempts::integer AS attempts, j.max_attempts::integer AS max_attempts, j.lease_seconds::integer,
            j.lease_token, to_json(j.lease_expires_at) AS lease_expires_at, to_json(j.run_at) AS run_at,
            to_json(j.expires_at) AS expires_at, j.dedup_key, to_json(j.created_at) AS created_at,
            CASE WHEN j.first_started_at = claimed_at THEN claimed_at_json ELSE to_json(j.first_started_at) END
              AS first_started_at,
            claimed_at_json AS started_at, j.progress,
            j.last_error, j.callback_url::text, j.failure_callback_url::text, j.run_ms::float8 AS run_ms,
            deliveries -> j.queue AS delivery, chosen.position::integer AS position;
END
$$;

-- ---------------------------------------------------------------------------
-- Enqueueing with a rate key
-- ---------------------------------------------------------------------------

-- 0007's enqueue_jobs, taking `rateKey` (with `rateLimit`,
-- `ratePeriodSeconds` and `rateOnExcess`, 'throttle' or 'drop', default
-- 'throttle') beside the other keys.
CREATE OR REPLACE FUNCTION skiplock.enqueue_jobs(jobs jsonb)
RETURNS SETOF skiplock.enqueue_answer
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
  one jsonb;
BEGIN
  IF NOT jobs @? '$[*] ? (@.dedupKey != null || @.concurrencyKey != null || @.orderingKey != null || @.rateKey != null
                          || @.debounceKey != null || @.debouncePeriodSeconds != null
                          || @.debounceMaxDelaySeconds != null || @.dedupOnConflict != null || @.dedupScope != null)' THEN
    -- Ids ascend in input order, so they put the results back in it.
    RETURN QUERY
    WITH written AS (
      INSERT INTO skiplock.jobs AS j
        (id, queue, type, tenant, payload, priority, state, run_at, max_attempts, lease_seconds,
         backoff_base_seconds, backoff_max_seconds, expires_at, dedup_key, dedup_window_seconds,
         callback_url, failure_callback_url)
      SELECT i.id, i.queue, i.type, i.tenant, i.payload, i.priority,
             CASE WHEN i.run_at > now() THEN 'scheduled' ELSE 'queued' END,
             i.run_at, i.max_attempts, i.lease_seconds, i.backoff_base_seconds, i.backoff_max_seconds,
             i.expires_at, i.dedup_key, i.dedup_window_seconds, i.callback_url, i.failure_callback_url
      FROM skiplock.enqueue_rows(jobs) i
      RETURNING skiplock.enqueued_job(j) AS job
    )
    SELECT (w.job).*, false, NULL::uuid, NULL::json, false, false FROM written w ORDER BY (w.job).id;
    RETURN;
  END IF;
  IF jobs @? '$[*] ? (@.debounceKey != null || @.debouncePeriodSeconds != null || @.debounceMaxDelaySeconds != null
                      || @.dedupOnConflict != null || @.dedupScope != null)' THEN
    FOR one IN SELECT e.job FROM jsonb_array_elements(jobs) WITH ORDINALITY AS e(job, ordinal) ORDER BY e.ordinal LOOP
      IF one @? '$ ? (@.debounceKey != null || @.debouncePeriodSeconds != null || @.debounceMaxDelaySeconds != null
                      || @.dedupOnConflict != null || @.dedupScope != null)' THEN
        RETURN QUERY SELECT * FROM skiplock.enqueue_singleton(one);
      ELSE
        RETURN QUERY SELECT * FROM skiplock.enqueue_jobs(jsonb_build_array(one));
      END IF;
    END LOOP;
    RETURN;
  END IF;
  RETURN QUERY
  WITH input AS MATERIALIZED (SELECT * FROM skiplock.enqueue_rows(jobs)),
  keys AS (
    INSERT INTO skiplock.dedup_keys AS k (tenant, queue, dedup_key, job_id)
    SELECT tenant, queue, dedup_key, id FROM input WHERE dedup_key IS NOT NULL
    ORDER BY ordinal
    ON CONFLICT (tenant, queue, dedup_key) DO UPDATE
      SET job_id = CASE WHEN k.expires_at <= now() THEN EXCLUDED.job_id ELSE k.job_id END,
          expires_at = CASE WHEN k.expires_at <= now() THEN NULL ELSE k.expires_at END
    RETURNING k.tenant, k.queue, k.dedup_key, k.job_id
  ),
  written AS (
    INSERT INTO skiplock.jobs AS j
      (id, queue, type, tenant, payload, priority, state, run_at, max_attempts, lease_seconds,
       backoff_base_seconds, backoff_max_seconds, expires_at, dedup_key, dedup_window_seconds,
       callback_url, failure_callback_url)
    SELECT id, queue, type, tenant, payload, priority,
           CASE WHEN run_at > now() THEN 'scheduled' ELSE 'queued' END,
           run_at, max_attempts, lease_seconds, backoff_base_seconds, backoff_max_seconds,
           expires_at, dedup_key, dedup_window_seconds, callback_url, failure_callback_url
    FROM input
    WHERE dedup_key IS NULL OR id IN (SELECT job_id FROM keys)
    ORDER BY ordinal
    RETURNING skiplock.enqueued_job(j) AS job
  ),
  -- Settled by jobs_inserted_take_key_slots at the end of this statement.
  keyed AS (
    INSERT INTO skiplock.keyed_jobs (job_id, tenant, key, ordered, slots, on_failure, rate_limit, rate_seconds, rate_mode)
    SELECT i.id, i.tenant, coalesce(e.job->>'orderingKey', e.job->>'concurrencyKey', e.job->>'rateKey'),
           e.job ? 'orderingKey',
           CASE WHEN e.job ? 'orderingKey' THEN 1 WHEN e.job ? 'rateKey' THEN NULL
                ELSE coalesce((e.job->>'concurrencyLimit')::integer, 1) END,
           coalesce(e.job->>'orderingOnFailure', CASE WHEN e.job ? 'orderingKey' THEN 'hold' ELSE 'continue' END),
           (e.job->>'rateLimit')::integer, (e.job->>'ratePeriodSeconds')::integer,
           CASE WHEN e.job ? 'rateKey' THEN coalesce(e.job->>'rateOnExcess', 'throttle') END
    FROM input i
    JOIN jsonb_array_elements(jobs) WITH ORDINALITY AS e(job, ordinal) ON e.ordinal = i.ordinal
    WHERE coalesce(e.job->>'orderingKey', e.job->>'concurrencyKey', e.job->>'rateKey') IS NOT NULL
      AND i.id IN (SELECT (w.job).id FROM written w)
  )
  -- Each input finds its new row by the id it was given, or else (deduplicated)
  -- the job that holds its key: equality joins the planner can hash, and a
  -- lookup by id for each dedup hit only.
  SELECT (inserted.job).*, inserted.job IS NULL AS deduplicated, key.job_id AS "heldBy",
         CASE WHEN inserted.job IS NULL AND key.job_id IS NOT NULL THEN
           (SELECT skiplock.job_json(a) FROM skiplock.all_jobs a WHERE a.id = key.job_id) END AS "heldJob",
         false, false
  FROM input i
  LEFT JOIN written inserted ON (inserted.job).id = i.id
  LEFT JOIN keys key
    ON inserted.job IS NULL AND key.tenant = i.tenant AND key.queue = i.queue AND key.dedup_key = i.dedup_key
  ORDER BY i.ordinal;
END
$$;

-- 0007's enqueue with a rate key: rate_key, rate_limit, rate_period_seconds
-- and rate_on_excess ('throttle' or 'drop', default 'throttle'). A dropped
-- job comes back cancelled, its lastError saying why.
--
--   SELECT skiplock.enqueue('shopify-call', '{"store": "acme"}', tenant => 'acme',
--                           rate_key => 'store:acme', rate_limit => 10, rate_period_seconds => 1)->>'id';
DROP FUNCTION skiplock.enqueue(text, jsonb, text, text, integer, timestamptz, interval, integer, integer, timestamptz,
                               text, integer, real, real, text, text, text, integer, text, text, text, text, text,
                               integer, integer);
CREATE FUNCTION skiplock.enqueue(
  queue                      text,
  payload                    jsonb       DEFAULT 'null',
  tenant                     text        DEFAULT 'default',
  type                       text        DEFAULT NULL,
  priority                   integer     DEFAULT NULL,
  run_at                     timestamptz DEFAULT NULL,
  delay                      interval    DEFAULT NULL,
  max_attempts               integer     DEFAULT NULL,
  lease_seconds              integer     DEFAULT NULL,
  expires_at                 timestamptz DEFAULT NULL,
  dedup_key                  text        DEFAULT NULL,
  dedup_window_seconds       integer     DEFAULT NULL,
  backoff_base_seconds       real        DEFAULT NULL,
  backoff_max_seconds        real        DEFAULT NULL,
  callback_url               text        DEFAULT NULL,
  failure_callback_url       text        DEFAULT NULL,
  concurrency_key            text        DEFAULT NULL,
  concurrency_limit          integer     DEFAULT NULL,
  ordering_key               text        DEFAULT NULL,
  ordering_on_failure        text        DEFAULT NULL,
  dedup_on_conflict          text        DEFAULT NULL,
  dedup_scope                text        DEFAULT NULL,
  debounce_key               text        DEFAULT NULL,
  debounce_period_seconds    integer     DEFAULT NULL,
  debounce_max_delay_seconds integer     DEFAULT NULL,
  rate_key                   text        DEFAULT NULL,
  rate_limit                 integer     DEFAULT NULL,
  rate_period_seconds        integer     DEFAULT NULL,
  rate_on_excess             text        DEFAULT NULL)
RETURNS json
LANGUAGE plpgsql AS $$
DECLARE
  enqueued json;
  new_id uuid;
  start_at timestamptz;
  retried boolean := false;
BEGIN
  IF queue IS NULL OR length(queue) NOT BETWEEN 1 AND 128 THEN
    PERFORM skiplock.refuse('queue', 'a name of 1 to 128 characters is required');
  ELSIF tenant IS NULL OR length(tenant) NOT BETWEEN 1 AND 128 THEN
    PERFORM skiplock.refuse('tenant', 'a name of 1 to 128 characters is required');
  ELSIF length(type) NOT BETWEEN 1 AND 128 THEN
    PERFORM skiplock.refuse('type', 'a name of 1 to 128 characters, or null for the queue''s name');
  ELSIF priority NOT BETWEEN -1000 AND 1000 THEN
    PERFORM skiplock.refuse('priority', format('must be from -1000 to 1000, not %s', priority));
  ELSIF run_at IS NOT NULL AND delay IS NOT NULL THEN
    PERFORM skiplock.refuse('delay', 'give run_at or delay, not both');
  ELSIF delay < interval '0' THEN
    PERFORM skiplock.refuse('delay', format('must not be negative, not %s', delay));
  ELSIF max_attempts NOT BETWEEN 1 AND 1000 THEN
    PERFORM skiplock.refuse('max_attempts', format('must be from 1 to 1000, not %s', max_attempts));
  ELSIF lease_seconds NOT BETWEEN 1 AND 86400 THEN
    PERFORM skiplock.refuse('lease_seconds', format('must be from 1 to 86400, not %s', lease_seconds));
  ELSIF length(dedup_key) NOT BETWEEN 1 AND 256 THEN
    PERFORM skiplock.refuse('dedup_key', 'a key of 1 to 256 characters, or null');
  ELSIF dedup_window_seconds < 0 THEN
    PERFORM skiplock.refuse('dedup_window_seconds', format('must not be negative, not %s', dedup_window_seconds));
  ELSIF backoff_base_seconds <= 0 OR backoff_max_seconds <= 0 THEN
    PERFORM skiplock.refuse('backoff_base_seconds', 'backoff times must be positive');
  ELSIF NOT (callback_url ~* '^https?://[^\s/?#]' AND length(callback_url) <= 2048) THEN
    PERFORM skiplock.refuse('callback_url', format('an http or https URL of at most 2048 characters, not %s', left(callback_url, 100)));
  ELSIF NOT (failure_callback_url ~* '^https?://[^\s/?#]' AND length(failure_callback_url) <= 2048) THEN
    PERFORM skiplock.refuse('failure_callback_url',
      format('an http or https URL of at most 2048 characters, not %s', left(failure_callback_url, 100)));
  ELSIF (concurrency_key IS NOT NULL)::integer + (ordering_key IS NOT NULL)::integer + (rate_key IS NOT NULL)::integer > 1 THEN
    PERFORM skiplock.refuse(CASE WHEN rate_key IS NOT NULL THEN 'rate_key' ELSE 'ordering_key' END,
                            'give one of concurrency_key, ordering_key and rate_key');
  ELSIF length(concurrency_key) NOT BETWEEN 1 AND 256 THEN
    PERFORM skiplock.refuse('concurrency_key', 'a key of 1 to 256 characters, or null');
  ELSIF length(ordering_key) NOT BETWEEN 1 AND 256 THEN
    PERFORM skiplock.refuse('ordering_key', 'a key of 1 to 256 characters, or null');
  ELSIF concurrency_limit NOT BETWEEN 1 AND 1000 OR (concurrency_limit IS NOT NULL AND concurrency_key IS NULL) THEN
    PERFORM skiplock.refuse('concurrency_limit', format('from 1 to 1000, with a concurrency_key, not %s', concurrency_limit));
  ELSIF ordering_on_failure NOT IN ('hold', 'continue') OR (ordering_on_failure IS NOT NULL AND ordering_key IS NULL) THEN
    PERFORM skiplock.refuse('ordering_on_failure', format('hold or continue, with an ordering_key, not %s', ordering_on_failure));
  ELSIF dedup_on_conflict NOT IN ('return', 'replace', 'refuse') OR (dedup_on_conflict IS NOT NULL AND dedup_key IS NULL) THEN
    PERFORM skiplock.refuse('dedup_on_conflict', format('return, replace or refuse, with a dedup_key, not %s', dedup_on_conflict));
  ELSIF dedup_scope NOT IN ('waiting', 'waitingOrRunning') OR (dedup_scope IS NOT NULL AND dedup_key IS NULL) THEN
    PERFORM skiplock.refuse('dedup_scope', format('waiting or waitingOrRunning, with a dedup_key, not %s', dedup_scope));
  ELSIF dedup_scope = 'waiting' AND dedup_window_seconds > 0 THEN
    PERFORM skiplock.refuse('dedup_window_seconds', 'a key of the waiting scope never counts an ended job: give no window');
  ELSIF debounce_key IS NOT NULL AND (dedup_key IS NOT NULL OR ordering_key IS NOT NULL OR run_at IS NOT NULL OR delay IS NOT NULL) THEN
    PERFORM skiplock.refuse('debounce_key', 'cannot combine with a dedup_key, an ordering_key, run_at or delay');
  ELSIF length(debounce_key) NOT BETWEEN 1 AND 256 THEN
    PERFORM skiplock.refuse('debounce_key', 'a key of 1 to 256 characters, or null');
  ELSIF debounce_period_seconds NOT BETWEEN 1 AND 315360000 OR ((debounce_period_seconds IS NULL) <> (debounce_key IS NULL)) THEN
    PERFORM skiplock.refuse('debounce_period_seconds',
      format('from 1 to 315360000, with a debounce_key, not %s', coalesce(debounce_period_seconds::text, 'none')));
  ELSIF debounce_max_delay_seconds NOT BETWEEN debounce_period_seconds AND 315360000
        OR (debounce_max_delay_seconds IS NOT NULL AND debounce_key IS NULL) THEN
    PERFORM skiplock.refuse('debounce_max_delay_seconds',
      format('from the period to 315360000, with a debounce_key, not %s', debounce_max_delay_seconds));
  ELSIF length(rate_key) NOT BETWEEN 1 AND 256 THEN
    PERFORM skiplock.refuse('rate_key', 'a key of 1 to 256 characters, or null');
  ELSIF rate_key IS NOT NULL AND (rate_limit IS NULL OR rate_period_seconds IS NULL) THEN
    PERFORM skiplock.refuse('rate_limit', 'a rate_key needs rate_limit and rate_period_seconds');
  ELSIF rate_limit NOT BETWEEN 1 AND 10000 OR (rate_limit IS NOT NULL AND rate_key IS NULL) THEN
    PERFORM skiplock.refuse('rate_limit', format('from 1 to 10000, with a rate_key, not %s', rate_limit));
  ELSIF rate_period_seconds NOT BETWEEN 1 AND 86400 OR (rate_period_seconds IS NOT NULL AND rate_key IS NULL) THEN
    PERFORM skiplock.refuse('rate_period_seconds',
      format('from 1 to 86400 seconds, with a rate_key, not %s', rate_period_seconds));
  ELSIF rate_on_excess NOT IN ('throttle', 'drop') OR (rate_on_excess IS NOT NULL AND rate_key IS NULL) THEN
    PERFORM skiplock.refuse('rate_on_excess', format('throttle or drop, with a rate_key, not %s', rate_on_excess));
  END IF;
  start_at := coalesce(run_at, now() + coalesce(delay, interval '0'));
  IF coalesce(dedup_on_conflict, dedup_scope, debounce_key) IS NOT NULL THEN
    SELECT e.id, e."heldJob" INTO new_id, enqueued
    -- Without the nulls (stripped before the payload goes in, which may hold some).
    FROM skiplock.enqueue_singleton(jsonb_strip_nulls(jsonb_build_object(
      'queue', queue, 'tenant', tenant, 'type', type, 'priority', priority,
      'runAt', CASE WHEN run_at IS NOT NULL OR delay IS NOT NULL THEN start_at END, 'maxAttempts', max_attempts,
      'leaseSeconds', lease_seconds, 'expiresAt', expires_at, 'dedupKey', dedup_key,
      'dedupWindowSeconds', dedup_window_seconds, 'backoffBaseSeconds', backoff_base_seconds,
      'backoffMaxSeconds', backoff_max_seconds, 'callbackUrl', callback_url, 'failureCallbackUrl', failure_callback_url,
      'concurrencyKey', concurrency_key, 'concurrencyLimit', concurrency_limit, 'orderingKey', ordering_key,
      'orderingOnFailure', ordering_on_failure, 'rateKey', rate_key, 'rateLimit', rate_limit,
      'ratePeriodSeconds', rate_period_seconds, 'rateOnExcess', rate_on_excess, 'dedupOnConflict', dedup_on_conflict,
      'dedupScope', dedup_scope, 'debounceKey', debounce_key, 'debouncePeriodSeconds', debounce_period_seconds,
      'debounceMaxDelaySeconds', debounce_max_delay_seconds)) || jsonb_build_object('payload', coalesce(payload, 'null'))) e;
    IF enqueued IS NULL THEN
      -- A new job, read after the insert trigger has settled its turn (a
      -- dropped one is in the history already).
      SELECT skiplock.job_json(a) INTO enqueued FROM skiplock.all_jobs a WHERE a.id = new_id;
    END IF;
    RETURN enqueued;
  END IF;
  LOOP
    -- A key in force returns its job (a finished job's key lapses after its dedup window).
    IF dedup_key IS NOT NULL THEN
      SELECT skiplock.job_json(a) INTO enqueued
      FROM skiplock.dedup_keys k JOIN skiplock.all_jobs a ON a.id = k.job_id
      WHERE (k.tenant, k.queue, k.dedup_key) = (enqueue.tenant, enqueue.queue, enqueue.dedup_key)
        AND (k.expires_at IS NULL OR k.expires_at > now());
      IF FOUND THEN
        RETURN enqueued;
      END IF;
    END IF;
    BEGIN
      -- jobs_inserted makes the tenant row, takes the dedup key and wakes
      -- workers; jobs_inserted_take_key_slots gives the job its turn or holds it.
      new_id := skiplock.uuid_v7(clock_timestamp());
      IF coalesce(concurrency_key, ordering_key, rate_key) IS NOT NULL THEN
        INSERT INTO skiplock.keyed_jobs (job_id, tenant, key, ordered, slots, on_failure, rate_limit, rate_seconds, rate_mode)
        VALUES (new_id, tenant, coalesce(ordering_key, concurrency_key, rate_key), ordering_key IS NOT NULL,
                CASE WHEN ordering_key IS NOT NULL THEN 1 WHEN rate_key IS NOT NULL THEN NULL
                     ELSE coalesce(concurrency_limit, 1) END,
                coalesce(ordering_on_failure, CASE WHEN ordering_key IS NOT NULL THEN 'hold' ELSE 'continue' END),
                rate_limit, rate_period_seconds, CASE WHEN rate_key IS NOT NULL THEN coalesce(rate_on_excess, 'throttle') END);
      END IF;
      INSERT INTO skiplock.jobs AS j
        (id, queue, type, tenant, payload, priority, state, run_at, max_attempts, lease_seconds,
         backoff_base_seconds, backoff_max_seconds, expires_at, dedup_key, dedup_window_seconds,
         callback_url, failure_callback_url)
      VALUES (new_id, queue, coalesce(type, queue), tenant, coalesce(payload, 'null'), coalesce(priority, 0),
              CASE WHEN start_at > now() THEN 'scheduled' ELSE 'queued' END, start_at, coalesce(max_attempts, 5),
              coalesce(lease_seconds, 60), coalesce(backoff_base_seconds, 1), coalesce(backoff_max_seconds, 3600),
              expires_at, dedup_key, coalesce(dedup_window_seconds, 0), callback_url, failure_callback_url)
      RETURNING j.id INTO new_id;
      -- Read after the insert trigger has settled the job's turn (a dropped
      -- job is in the history already).
      SELECT skiplock.job_json(a) INTO enqueued FROM skiplock.all_jobs a WHERE a.id = new_id;
      RETURN enqueued;
    EXCEPTION WHEN unique_violation THEN
      -- A concurrent enqueue took the key first: return its job. Once: under
      -- a snapshot older than that job (REPEATABLE READ) the refusal stands.
      IF retried THEN
        RAISE;
      END IF;
      retried := true;
    END;
  END LOOP;
END
$$;

-- 0007's enqueue_flow, refusing rate keys too.
CREATE OR REPLACE FUNCTION skiplock.enqueue_flow(jobs jsonb, dependencies jsonb)
RETURNS SETOF json
LANGUAGE plpgsql AS $$
DECLARE
  ids uuid[];
BEGIN
  IF jobs @? '$[*] ? (@.concurrencyKey != null || @.orderingKey != null || @.rateKey != null)' THEN
    PERFORM skiplock.refuse('jobs', 'a job of a flow cannot name a concurrency key, an ordering key or a rate key');
  ELSIF jobs @? '$[*] ? (@.debounceKey != null || @.dedupOnConflict != null || @.dedupScope != null)' THEN
    PERFORM skiplock.refuse('jobs', 'a job of a flow cannot name a debounce key, a dedupOnConflict or a dedupScope');
  END IF;
  WITH input AS (
    SELECT i.job, i.ordinal FROM jsonb_array_elements(jobs) WITH ORDINALITY AS i(job, ordinal)
  ),
  parked AS (
    SELECT jsonb_agg(
             CASE WHEN EXISTS (SELECT 1 FROM jsonb_array_elements(dependencies) d WHERE (d->>'job')::bigint = i.ordinal - 1)
                  THEN i.job - 'delaySeconds' || jsonb_build_object('runAt', skiplock.until_woken())
                  ELSE i.job END
             ORDER BY i.ordinal) AS jobs
    FROM input i
  )
  SELECT array_agg(e.id ORDER BY e.id) INTO ids FROM parked p, skiplock.enqueue_jobs(p.jobs) e;
  UPDATE skiplock.jobs j SET state = 'parked'
  WHERE j.id = ANY (ids) AND j.run_at = skiplock.until_woken() AND j.state = 'scheduled';
  INSERT INTO skiplock.job_links (job_id, other_id, kind, on_failure)
  SELECT ids[(d->>'job')::integer + 1], ids[(d->>'dependsOn')::integer + 1], 'dependency',
         coalesce(d->>'onFailure', 'fail')
  FROM jsonb_array_elements(dependencies) d;
  RETURN QUERY SELECT skiplock.job_json(j) FROM skiplock.jobs j WHERE j.id = ANY (ids) ORDER BY j.id;
END
$$;
