-- skiplock 0027: a rate key's job gives its key back when it starts.
--
-- A rate key counts starts, not running jobs, so a started job holds
-- nothing of its key: its key record is released when it starts, and its
-- end writes nothing of the key, where each completion of such jobs marked
-- their records released, locked their keys and looked for idle ones to
-- drop. An idle key is dropped by the key's visit after its window
-- (skiplock.refill_rate_keys), which the start of its last turn asks for.
-- A started job that waits again (a retry, a hand-back, a parked job
-- woken) marks its record started again, which keeps its key from being
-- dropped and makes claims look at rate keys; the claim that starts it
-- again makes its key again if it was dropped, and counts that start.
-- Records left started by a claim before this migration end as they did.

-- 0025's admit_rate_limited: admitted jobs' records released, a visit asked
-- for, and a key whose row is gone made again.
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
  -- Whether a skipped job's key has no row: one to make before locking again.
  keys_missing boolean;
BEGIN
  -- Their keys' rows are locked, skipping those another transaction holds
  -- (a claim or a completion of the same key, or an enqueue not yet
  -- committed): their jobs stay waiting for a later claim, so a claim never
  -- waits for a key, and two claims cannot each hold a key the other waits
  -- for. The start time is read after the locks: every start a locked key
  -- records committed before it, so the window counted is the one the
  -- starts fall in.
  -- A key's row goes once its window is empty and no job of it waits for a
  -- turn or to run again (skiplock.drop_idle_keys); a job that comes back
  -- to wait as that happens (a retry, a hand-back) finds its key gone: it is
  -- made again here, with the job's numbers, and the keys locked once more.
  FOR pass IN 1..2 LOOP
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
           (SELECT array_agg(l.key ORDER BY l.tenant, l.key) FROM locked_keys l),
           bool_or(NOT EXISTS (SELECT 1 FROM skiplock.concurrency_keys c WHERE c.tenant = d.tenant AND c.key = d.key))
             FILTER (WHERE NOT d.key_locked)
    INTO job_addresses, job_positions, job_ids, job_tenants, job_keys, job_slots, skipped_addresses, key_tenants,
         key_names, keys_missing
    FROM sorted d;
    EXIT WHEN pass = 2 OR NOT coalesce(keys_missing, false);
    -- In key order, as enqueues make keys, so two statements making the same keys cannot deadlock.
    INSERT INTO skiplock.concurrency_keys
      (tenant, key, ordered, slots, on_failure, rate_limit, rate_seconds, rate_mode)
    SELECT DISTINCT ON (kj.tenant, kj.key) kj.tenant, kj.key, kj.ordered, kj.slots, kj.on_failure, kj.rate_limit,
           kj.rate_seconds, kj.rate_mode
    FROM unnest(skipped_addresses) AS r(address)
    JOIN skiplock.jobs j ON j.ctid = r.address
    JOIN skiplock.keyed_jobs kj ON kj.job_id = j.id
    WHERE kj.rate_limit IS NOT NULL
    ORDER BY kj.tenant, kj.key, kj.job_id DESC
    ON CONFLICT (tenant, key) DO NOTHING;
  END LOOP;
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
                         -- Else, when its last turn has started, its visit after the window,
                         -- which drops it if idle by then; while turns are left, the start of
                         -- the last one asks (a visit kept due indexes every write of the row).
                         WHEN c.taken - n.had_turns = 0
                         THEN coalesce(c.refill_at, claimed_at + make_interval(secs => c.rate_seconds))
                         ELSE c.refill_at END
    FROM (SELECT d.tenant, d.key, count(*) FILTER (WHERE d.admit)::integer AS admitted,
                 count(*) FILTER (WHERE NOT d.admit)::integer AS held,
                 count(*) FILTER (WHERE d.slot = 'taken')::integer AS had_turns
          FROM judged d GROUP BY d.tenant, d.key) n
    WHERE c.tenant = n.tenant AND c.key = n.key
  ),
  started AS (
    -- A started job holds nothing of its key: its record is released now, not at its end.
    UPDATE skiplock.keyed_jobs kj SET slot = CASE WHEN d.admit THEN 'released' ELSE 'waiting' END
    FROM judged d WHERE kj.job_id = d.id AND (NOT d.admit OR d.slot <> 'released')
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


-- 0020's claim_batch: a claim looks at rate keys while a job of one waits to
-- run again, though no key's row is left.
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
  first_rate integer;
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
  -- The queues with a rate limit this claim took jobs of: it records their starts.
  rated_queues text[];
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

  SELECT q.concurrency, q.rate_limit, q.delivery, q.paused_at IS NOT NULL
  INTO first_cap, first_rate, first_delivery, first_paused
  FROM skiplock.queues q WHERE q.name = first_queue;

  -- One queue of one tenant waiting, neither limited: nothing to share or
  -- count, so a plain SKIP LOCKED claim of its first jobs in claim order.
  IF NOT coalesce(more_waiting, false)
     AND first_cap IS NULL AND first_rate IS NULL
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
    --    running counts and their rate windows' starts, from that snapshot,
    --    cannot be low then, so a cap or a rate limit holds however many
    --    claimers run. Step 4 does the same for tenants.
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
    -- A queue's room: its cap less its running jobs, its rate limit less
    -- its starts in the window (counted at now(), which no start of this
    -- claim precedes), whichever is less.
    queue_load AS MATERIALIZED (
      SELECT q.name, q.claim_seq, q.rate_limit,
             least(q.concurrency - CASE WHEN q.concurrency IS NOT NULL THEN (
                     SELECT count(*) FROM skiplock.jobs r WHERE r.queue = q.name AND r.state = 'running') END,
                   q.rate_limit - skiplock.window_starts(q.starts, q.rate_seconds, now())) AS room
      FROM skiplock.queues q
      WHERE (q.concurrency IS NOT NULL OR q.rate_limit IS NOT NULL) AND q.paused_at IS NULL
        AND q.name IN (SELECT w.queue FROM waiting_groups w)
        AND (queues IS NULL OR q.name = ANY(queues))
        AND (q.delivery IS NULL OR q.delivery->>'target' = ANY(delivery_targets))
    ),
    capped AS MATERIALIZED (
      SELECT q.name, q.claim_seq, l.claim_seq AS seen_seq, l.room, l.rate_limit FROM skiplock.queues q
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
        AND ((q.concurrency IS NULL AND q.rate_limit IS NULL) OR c.claim_seq = c.seen_seq)
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
          -- Tested again on the row the lock finds: a reschedule (or an
          -- expiry) that committed after this claim chose the job must win.
          AND j.run_at <= now() AND (j.expires_at IS NULL OR j.expires_at > now())
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
            FROM (SELECT DISTINCT r.queue, r.delivery FROM ready_groups r WHERE r.delivery IS NOT NULL) d),
           (SELECT array_agg(c.name) FROM capped c
            WHERE c.rate_limit IS NOT NULL AND c.name IN (SELECT l.queue FROM locked l))
    INTO locked_rows, deliveries, rated_queues FROM locked;
  END IF;
  IF locked_rows IS NULL THEN
    RETURN;
  END IF;

  -- Start the locked jobs, by the row's address: each is locked, so it stays
  -- where the lock found it, and no index is searched again. Each comes back
  -- with its place in the claim's order.
  -- Jobs of rate keys start only while their key's window has room: two
  -- probes when no rate key is in use (a job that waits again after its
  -- key was dropped is one still: its record says started).
  IF EXISTS (SELECT 1 FROM skiplock.concurrency_keys c WHERE c.rate_limit IS NOT NULL)
     OR EXISTS (SELECT 1 FROM skiplock.keyed_jobs kj WHERE kj.slot = 'started') THEN
    SELECT a.admitted, a.claimed_at INTO locked_rows, claimed_at FROM skiplock.admit_rate_limited(locked_rows) a;
    IF locked_rows IS NULL THEN
      RETURN;
    END IF;
  ELSE
    claimed_at := clock_timestamp();
  END IF;
  -- The starts in rate-limited queues, at the time the jobs start: their
  -- rows are locked since `capped`, so none can start jobs meanwhile.
  IF rated_queues IS NOT NULL THEN
    UPDATE skiplock.queues q
    SET starts = coalesce((SELECT array_agg(s ORDER BY s) FROM unnest(q.starts) s
                           WHERE s > claimed_at - make_interval(secs => q.rate_seconds)), '{}')
                 || array_fill(claimed_at, ARRAY[n.started])
    FROM (SELECT j.queue, count(*)::integer AS started
          FROM unnest(locked_rows) AS r(address) JOIN skiplock.jobs j ON j.ctid = r.address
          WHERE j.queue = ANY (rated_queues) GROUP BY 1) n
    WHERE q.name = n.queue;
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

-- 0001's on_job_waiting_again: a job with a rate key that waits again after
-- it started marks its record started until it starts again. Only the
-- record: its key's row is not locked here, where rows of several keys
-- come back in no particular order (a statement that hands back many jobs).
CREATE OR REPLACE FUNCTION skiplock.on_job_waiting_again() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM skiplock.note_waiting_change();
  IF OLD.state IN ('running', 'parked') THEN
    UPDATE skiplock.keyed_jobs kj SET slot = 'started'
    WHERE kj.job_id = NEW.id AND kj.rate_limit IS NOT NULL AND kj.slot = 'released';
  END IF;
  RETURN NEW;
END
$$;

-- 0014's to_dead_letter_queue: a job with a rate key stays failed in its
-- queue, as one with a concurrency or ordering key does, though its record
-- was released when it started.
CREATE OR REPLACE FUNCTION skiplock.to_dead_letter_queue() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  target text;
BEGIN
  SELECT q.dead_letter_queue INTO target FROM skiplock.queues q WHERE q.name = NEW.queue;
  IF target IS NULL
     OR EXISTS (SELECT 1 FROM skiplock.keyed_jobs k
                WHERE k.job_id = NEW.id AND (k.slot IN ('taken', 'started', 'waiting') OR k.rate_limit IS NOT NULL))
     OR EXISTS (SELECT 1 FROM skiplock.job_events e
                WHERE e.job_id = NEW.id AND e.kind = 'retried' AND e.detail ? 'deadLetter') THEN
    RETURN NULL;
  END IF;
  WITH gone AS (
    DELETE FROM skiplock.finished_jobs f WHERE f.id = NEW.id AND f.finished_at = NEW.finished_at RETURNING f
  ),
  back AS (
    INSERT INTO skiplock.jobs SELECT r.* FROM gone, LATERAL skiplock.requeued_job(gone.f, target) r
    RETURNING id
  )
  INSERT INTO skiplock.job_events (job_id, kind, attempt, detail)
  SELECT b.id, 'retried', 0, jsonb_build_object('deadLetter', true, 'fromQueue', NEW.queue) FROM back b;
  RETURN NULL;
END
$$;

-- 0026's fill_key_slots: the statement that ends a drop key's excess runs only
-- when a drop key is among the keys filled.
CREATE OR REPLACE FUNCTION skiplock.fill_key_slots(key_tenants text[], key_names text[]) RETURNS void
LANGUAGE plpgsql
-- Planned once per connection: planning its statements afresh for each
-- call's arrays cost more than running them.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
  turned integer;
  rated boolean;
  -- Whether a key drops its excess: only then can an unsettled job end here.
  dropping boolean;
BEGIN
  WITH keys AS MATERIALIZED (
    SELECT c.tenant, c.key, c.ordered, c.rate_limit IS NOT NULL AS rated, c.rate_mode = 'drop' AS drops,
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
  SELECT count(*), (SELECT coalesce(bool_or(k.rated), false) FROM keys k),
         (SELECT coalesce(bool_or(k.drops), false) FROM keys k)
  INTO turned, rated, dropping FROM woken;
  IF turned > 0 THEN
    -- Once for every job turned: jobs_waiting_again leaves held jobs to this.
    PERFORM skiplock.note_waiting_change();
    IF skiplock.anyone_listening() THEN
      PERFORM pg_notify('skiplock_jobs', '');
    END IF;
  END IF;

  -- The just-inserted jobs of a 'drop' key without a turn end cancelled,
  -- saying why, as a cancel would end them. Only when such a key is among
  -- these: the statement's insert into the history runs its triggers even
  -- when it ends nothing.
  IF dropping THEN
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
