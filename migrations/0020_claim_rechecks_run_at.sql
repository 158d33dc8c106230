-- A claim of several tenants or queues chooses its jobs from its snapshot,
-- then locks each by id. The lock re-tested the job's state only, so a
-- reschedule that committed in between (a later run_at) was not seen, and
-- the job started before its new time (fault scenario 20 found it: a bulk
-- reschedule beside four claiming drains). The lock now re-tests the run
-- time and the expiry too, as the single-queue path's locking scan already
-- does. 0016's function, with that one change.
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
