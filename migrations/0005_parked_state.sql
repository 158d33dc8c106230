-- skiplock 0005: parked jobs get a state of their own; queues can be
-- paused; steps are recorded at a lower cost; the step history goes with
-- its jobs.
--
-- A job that sleeps, waits for an event or for other jobs (0004) used to
-- wait as `scheduled` with its run time ahead, so it sat in jobs_waiting_idx
-- beside the jobs a claim can take: every claim stepped over the parked
-- entries of each tenant and queue, and a tenant or queue holding only
-- parked jobs sent every claim down its path for several waiting groups.
-- Parked jobs now wait as `parked`, outside the waiting states and that
-- index, in jobs_parked_idx by the time they resume. A claim first moves
-- the parked jobs whose time has come back to waiting (one probe of that
-- index when none has); what wakes one early (an event, a child's end, the
-- last dependency's end) moves it back in the statement that records it.
-- The API shows a parked job as it did: `scheduled` until its time, with
-- what it waits for.

ALTER TABLE skiplock.jobs DROP CONSTRAINT jobs_state_live;
ALTER TABLE skiplock.jobs ADD CONSTRAINT jobs_state_live
  CHECK (state IN ('scheduled', 'queued', 'retrying', 'running', 'parked')) NOT VALID;
ALTER TABLE skiplock.jobs VALIDATE CONSTRAINT jobs_state_live;

-- A running job parks; a waiting one is parked by a flow (its dependencies)
-- or by this migration; a parked one waits again when it wakes or is
-- rescheduled.
CREATE OR REPLACE FUNCTION skiplock.is_legal_transition(from_state text, to_state text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  RETURN (from_state, to_state) IN (
    ('scheduled', 'running'), ('queued', 'running'), ('retrying', 'running'),
    ('running', 'scheduled'), ('running', 'queued'), ('running', 'retrying'),
    ('scheduled', 'queued'), ('queued', 'scheduled'), ('retrying', 'queued'), ('retrying', 'scheduled'),
    ('running', 'parked'), ('scheduled', 'parked'), ('parked', 'scheduled'), ('parked', 'queued'));
END
$$;

-- The jobs parked before this migration: those whose last event is their
-- parking, and flow dependents waiting for their dependencies.
UPDATE skiplock.jobs j SET state = 'parked'
WHERE j.state = 'scheduled'
  AND (j.run_at = skiplock.until_woken()
       OR (SELECT e.kind FROM skiplock.job_events e WHERE e.job_id = j.id ORDER BY e.id DESC LIMIT 1) = 'parked');

-- Parked jobs by the time they resume (skiplock.until_woken() when only an
-- event, a child or a dependency can wake them).
CREATE INDEX jobs_parked_idx ON skiplock.jobs (run_at) WHERE state = 'parked';

-- The status the API shows: a parked job is scheduled until its time.
CREATE OR REPLACE FUNCTION skiplock.job_status(state text, run_at timestamptz) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN state IN ('scheduled', 'queued', 'retrying', 'parked') AND run_at <= now() THEN 'queued'
    WHEN state IN ('scheduled', 'queued', 'parked') THEN 'scheduled'
    ELSE state
  END
$$;

CREATE OR REPLACE FUNCTION skiplock.park(j skiplock.jobs, until timestamptz, detail jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE skiplock.jobs
  SET state = 'parked', run_at = until, attempts = attempts - 1,
      lease_token = NULL, lease_expires_at = NULL,
      run_ms = run_ms + skiplock.ms_between(started_at, clock_timestamp())
  WHERE id = j.id;
  INSERT INTO skiplock.job_events (job_id, kind, attempt, worker_id, detail)
  VALUES (j.id, 'parked', j.attempts, j.worker_id,
          detail || jsonb_build_object('until', CASE WHEN until < skiplock.until_woken() THEN skiplock.iso(until) END));
END
$$;

-- Parked jobs whose time has come (a sleep's end, an event wait's timeout,
-- a step's retry) wait again, at most `max_jobs` a call, oldest first; the
-- next call takes the rest. Locked ones are being woken by another call or
-- by what they waited for, and are left to it. Their history says nothing
-- more: their 'parked' event holds the time, and 'resumed' is kept for what
-- woke a job before it (an event, the jobs it waited for).
CREATE FUNCTION skiplock.wake_parked_jobs(max_jobs integer DEFAULT 1000) RETURNS integer
LANGUAGE plpgsql
SET enable_seqscan = off
AS $$
DECLARE
  woken integer := 0;
BEGIN
  IF EXISTS (SELECT 1 FROM skiplock.jobs p WHERE p.state = 'parked' AND p.run_at <= now()) THEN
    UPDATE skiplock.jobs j SET state = 'queued'
    WHERE j.id IN (SELECT p.id FROM skiplock.jobs p WHERE p.state = 'parked' AND p.run_at <= now()
                   ORDER BY p.run_at LIMIT max_jobs FOR UPDATE SKIP LOCKED);
    GET DIAGNOSTICS woken = ROW_COUNT;
  END IF;
  RETURN woken;
END
$$;

-- A paused queue keeps its waiting jobs and its settings, and no claim
-- takes its jobs until it is resumed (jobs already running finish).
ALTER TABLE skiplock.queues ADD COLUMN paused_at timestamptz;

-- A claim wakes the parked jobs due first, so it (and every claim after it)
-- can take them; it passes over paused queues. The rest is 0001's claim,
-- but for the probe of each group's ready jobs in ready_groups and the
-- lookup of the chosen jobs, whose plans no longer depend on the
-- statistics.
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
  claimed_at := clock_timestamp();
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

-- What an event or the jobs waited on resume: parked jobs. The bodies are
-- 0004's but for the state they wake.
CREATE OR REPLACE FUNCTION skiplock.send_event(
  event   text,
  payload jsonb    DEFAULT 'null',
  tenant  text     DEFAULT 'default',
  key     text     DEFAULT NULL,
  keep    interval DEFAULT interval '1 day')
RETURNS json
LANGUAGE plpgsql AS $$
DECLARE
  sent timestamptz := clock_timestamp();
  received jsonb;
  woken integer;
BEGIN
  IF event IS NULL OR length(event) NOT BETWEEN 1 AND 200 THEN
    PERFORM skiplock.refuse('event', 'must be a name of 1 to 200 characters');
  END IF;
  IF key IS NOT NULL AND length(key) NOT BETWEEN 1 AND 200 THEN
    PERFORM skiplock.refuse('key', 'must be 1 to 200 characters when given');
  END IF;
  IF tenant IS NULL OR length(tenant) NOT BETWEEN 1 AND 128 THEN
    PERFORM skiplock.refuse('tenant', 'must be 1 to 128 characters');
  END IF;
  IF keep IS NULL OR keep < interval '0' OR keep > interval '365 days' THEN
    PERFORM skiplock.refuse('keep', 'must be from 0 to 365 days');
  END IF;
  payload := coalesce(payload, 'null');
  received := jsonb_build_object('payload', payload, 'sentAt', skiplock.iso(sent));
  PERFORM skiplock.lock_event(tenant, event);
  DELETE FROM skiplock.events e WHERE e.tenant = send_event.tenant AND e.name = event AND e.expires_at <= now();
  IF keep > interval '0' THEN
    INSERT INTO skiplock.events AS e (tenant, name, key, payload, sent_at, expires_at)
    VALUES (tenant, event, coalesce(key, ''), payload, sent, sent + keep)
    ON CONFLICT ON CONSTRAINT events_pkey DO UPDATE
      SET payload = EXCLUDED.payload, sent_at = EXCLUDED.sent_at, expires_at = EXCLUDED.expires_at;
  END IF;
  WITH taken AS (
    DELETE FROM skiplock.event_waits w
    WHERE w.tenant = send_event.tenant AND w.event = send_event.event
      AND (w.key IS NULL OR w.key = coalesce(send_event.key, ''))
    RETURNING w.job_id, w.step_name
  ),
  recorded AS (
    INSERT INTO skiplock.job_steps (job_id, name, kind, done, result)
    SELECT t.job_id, t.step_name, 'event', true, received FROM taken t
    ON CONFLICT ON CONSTRAINT job_steps_pkey DO NOTHING
    RETURNING job_id
  ),
  resumed AS (
    UPDATE skiplock.jobs j SET state = 'queued', run_at = now()
    FROM recorded r
    WHERE j.id = r.job_id AND j.state = 'parked'
    RETURNING j.id, j.attempts
  ),
  history AS (
    INSERT INTO skiplock.job_events (job_id, kind, attempt, detail)
    SELECT r.id, 'resumed', r.attempts, jsonb_build_object('event', event, 'key', key) FROM resumed r
  )
  SELECT count(*) INTO woken FROM recorded;
  -- Workers that LISTEN take the resumed jobs at once, as they do new ones.
  IF woken > 0 AND skiplock.anyone_listening() THEN
    PERFORM pg_notify('skiplock_jobs', '');
  END IF;
  RETURN json_build_object('event', event, 'key', key, 'tenant', tenant, 'sentAt', skiplock.iso(sent), 'woken', woken);
END
$$;

-- A flow's dependents are parked from the start.
CREATE OR REPLACE FUNCTION skiplock.enqueue_flow(jobs jsonb, dependencies jsonb)
RETURNS SETOF json
LANGUAGE plpgsql AS $$
DECLARE
  ids uuid[];
BEGIN
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

CREATE OR REPLACE FUNCTION skiplock.on_linked_jobs_finished() RETURNS trigger
LANGUAGE plpgsql
SET enable_nestloop = on
SET enable_mergejoin = on
SET enable_seqscan = on
SET enable_bitmapscan = on
AS $$
DECLARE
  ended jsonb;
  resumed_count integer;
BEGIN
  -- A statement trigger fires for an insert of no rows too, this function's own included.
  IF NOT EXISTS (SELECT 1 FROM finished) THEN
    RETURN NULL;
  END IF;
  IF EXISTS (SELECT 1 FROM skiplock.event_waits LIMIT 1) THEN
    DELETE FROM skiplock.event_waits w USING finished f WHERE w.job_id = f.id;
  END IF;
  -- Nothing more unless a job waits on one of these, or one is a cancelled parent
  -- (job_links keeps resolved links as history, so it is rarely empty).
  IF NOT EXISTS (SELECT 1 FROM skiplock.job_links LIMIT 1)
     OR NOT EXISTS (
       SELECT 1 FROM finished f
       WHERE EXISTS (SELECT 1 FROM skiplock.job_links l WHERE l.other_id = f.id AND l.resolved_at IS NULL)
          OR (f.state = 'cancelled'
              AND EXISTS (SELECT 1 FROM skiplock.job_links l WHERE l.job_id = f.id AND l.kind = 'child'))) THEN
    RETURN NULL;
  END IF;
  -- The jobs waiting on these, locked first (in id order): two jobs a parent
  -- or a dependent waits for may end at once, in two transactions, and each
  -- must see the other's end once it committed, or neither would resume it.
  PERFORM 1 FROM skiplock.jobs j
  WHERE j.id IN (SELECT l.job_id FROM skiplock.job_links l JOIN finished f ON f.id = l.other_id
                 WHERE l.resolved_at IS NULL)
  ORDER BY j.id
  FOR UPDATE OF j;
  WITH resolved AS (
    UPDATE skiplock.job_links l SET resolved_at = f.finished_at
    FROM finished f
    WHERE l.other_id = f.id AND l.resolved_at IS NULL
    RETURNING l.job_id, l.kind, l.step_name, l.on_failure, f.id AS other_id, f.type, f.state, f.result, f.last_error
  )
  SELECT coalesce(jsonb_agg(r), '[]') INTO ended FROM resolved r;

  -- Children's ends, as their parents' invoke steps.
  INSERT INTO skiplock.job_steps (job_id, name, kind, done, result)
  SELECT e.job_id, e.step_name, 'invoke', true,
         jsonb_build_object('jobId', e.other_id, 'status', e.state, 'result', e.result, 'error', e.last_error)
  FROM jsonb_to_recordset(ended) AS e(job_id uuid, kind text, step_name text, other_id uuid, state text, result jsonb,
                                      last_error jsonb)
  WHERE e.kind = 'child'
  ON CONFLICT ON CONSTRAINT job_steps_pkey DO NOTHING;

  -- Dependents that must not run after a failed dependency end failed.
  WITH doomed AS (
    DELETE FROM skiplock.jobs j
    USING (SELECT DISTINCT ON (e.job_id) e.job_id, e.other_id, e.type, e.state
           FROM jsonb_to_recordset(ended) AS e(job_id uuid, kind text, on_failure text, other_id uuid, type text, state text)
           WHERE e.kind = 'dependency' AND e.on_failure = 'fail' AND e.state <> 'succeeded') d
    WHERE j.id = d.job_id AND j.state <> 'running'
    RETURNING skiplock.as_finished(j, 'failed', NULL, jsonb_build_object(
      'name', 'DependencyFailedError',
      'message', format('dependency %s (%s) ended %s', d.other_id, d.type, d.state),
      'dependencyId', d.other_id)) AS finished
  )
  INSERT INTO skiplock.finished_jobs SELECT (d.finished).* FROM doomed d;

  -- Parents and dependents with no child or dependency left to wait for resume.
  WITH resumed AS (
    UPDATE skiplock.jobs j SET state = 'queued', run_at = now()
    WHERE j.id IN (SELECT e.job_id FROM jsonb_to_recordset(ended) AS e(job_id uuid))
      AND j.state = 'parked'
      AND NOT EXISTS (SELECT 1 FROM skiplock.job_links l WHERE l.job_id = j.id AND l.resolved_at IS NULL)
    RETURNING j.id, j.attempts
  )
  INSERT INTO skiplock.job_events (job_id, kind, attempt, detail)
  SELECT r.id, 'resumed', r.attempts, jsonb_build_object('after', 'linked jobs ended') FROM resumed r;
  GET DIAGNOSTICS resumed_count = ROW_COUNT;
  IF resumed_count > 0 AND skiplock.anyone_listening() THEN
    PERFORM pg_notify('skiplock_jobs', '');
  END IF;

  -- A cancelled parent's children that have not started are cancelled too; running ones are asked to stop.
  -- A child locked at this moment is ending (or starting) in another transaction, which may be
  -- waiting for this parent's lock above: it is skipped rather than waited for.
  WITH children AS (
    SELECT j.id, j.state FROM skiplock.jobs j
    WHERE j.id IN (SELECT l.other_id FROM finished f JOIN skiplock.job_links l ON l.job_id = f.id
                   WHERE f.state = 'cancelled' AND l.kind = 'child')
    FOR UPDATE SKIP LOCKED
  ),
  asked AS (
    UPDATE skiplock.jobs j SET cancel_requested_at = coalesce(j.cancel_requested_at, now())
    FROM children c WHERE j.id = c.id AND c.state = 'running'
  ),
  dropped AS (
    DELETE FROM skiplock.jobs j USING children c
    WHERE j.id = c.id AND c.state <> 'running'
    RETURNING skiplock.as_finished(j, 'cancelled', NULL,
      jsonb_build_object('name', 'ParentCancelledError', 'message', 'its parent job was cancelled')) AS finished
  )
  INSERT INTO skiplock.finished_jobs SELECT (d.finished).* FROM dropped d;
  RETURN NULL;
END
$$;

-- ---------------------------------------------------------------------------
-- Steps recorded at a lower cost
-- ---------------------------------------------------------------------------

-- 0004's record_steps, in plpgsql so a connection plans it once (a SQL
-- function's statement was planned again at every call, and the plan
-- could read the whole jobs table), and extending a lease only once half
-- of it is spent: an update that leaves lease_expires_at as it was adds no
-- index entries (a HOT update), where moving it wrote one in jobs_pkey and
-- jobs_running_idx for every step. The row is updated either way, which
-- fences the record by the lease token until it commits.
CREATE OR REPLACE FUNCTION skiplock.record_steps(steps jsonb)
RETURNS TABLE (job_id uuid, name text)
LANGUAGE plpgsql
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH input AS MATERIALIZED (
    SELECT * FROM jsonb_to_recordset(steps)
      AS x("jobId" uuid, "leaseToken" uuid, name text, result jsonb, "leaseSeconds" integer)
  ),
  owned AS (
    UPDATE skiplock.jobs j
    SET lease_expires_at = CASE
          WHEN j.lease_expires_at < now() + make_interval(secs => i."leaseSeconds" / 2.0)
          THEN greatest(j.lease_expires_at, now() + make_interval(secs => i."leaseSeconds"))
          ELSE j.lease_expires_at END
    FROM input i
    WHERE j.id = i."jobId" AND j.lease_token = i."leaseToken"
    RETURNING j.id, j.attempts
  )
  INSERT INTO skiplock.job_steps AS s (job_id, name, kind, done, result, attempt)
  SELECT i."jobId", i.name, 'do', true, i.result, o.attempts
  FROM input i JOIN owned o ON o.id = i."jobId"
  ON CONFLICT ON CONSTRAINT job_steps_pkey DO UPDATE
    SET done = true, result = EXCLUDED.result, attempt = EXCLUDED.attempt, recorded_at = EXCLUDED.recorded_at
    WHERE NOT s.done
  RETURNING s.job_id, s.name;
END
$$;

-- ---------------------------------------------------------------------------
-- The step history goes with its jobs
-- ---------------------------------------------------------------------------

-- A job's steps and its links to the jobs it waited for (job_steps,
-- job_links: its history, kept after it ends) are deleted with its day of
-- finished jobs, in the change that drops the day, so pruning stays one
-- statement per day dropped and costs nothing on the days between.
CREATE OR REPLACE FUNCTION skiplock.maintain_finished_jobs(retention interval, days_ahead integer DEFAULT 2)
RETURNS TABLE (created integer, dropped integer, deleted integer)
LANGUAGE plpgsql
SET lock_timeout = '100ms'
AS $$
DECLARE
  today date := (now() AT TIME ZONE 'UTC')::date;
  -- Past the retention, and summed by the statistics' rollup.
  prune_before timestamptz := least(now() - retention, (SELECT rolled_through FROM skiplock.attempt_stats_rollup));
  day date;
  partition_name text;
  partition_day date;
BEGIN
  created := 0; dropped := 0; deleted := 0;
  FOR day IN SELECT generate_series(today, today + days_ahead, interval '1 day')::date LOOP
    partition_name := 'finished_jobs_' || to_char(day, 'YYYYMMDD');
    CONTINUE WHEN to_regclass('skiplock.' || partition_name) IS NOT NULL;
    -- Rows of that day already in the default partition keep the day there.
    CONTINUE WHEN EXISTS (
      SELECT 1 FROM skiplock.finished_jobs_default
      WHERE finished_at >= day::timestamp AT TIME ZONE 'UTC' AND finished_at < (day + 1)::timestamp AT TIME ZONE 'UTC');
    BEGIN
      EXECUTE format('CREATE TABLE skiplock.%I PARTITION OF skiplock.finished_jobs FOR VALUES FROM (%L) TO (%L)',
                     partition_name, day::timestamp AT TIME ZONE 'UTC', (day + 1)::timestamp AT TIME ZONE 'UTC');
      created := created + 1;
    EXCEPTION WHEN lock_not_available OR duplicate_table THEN
      NULL;
    END;
  END LOOP;

  FOR partition_name IN
    SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'skiplock.finished_jobs'::regclass AND c.relname ~ '^finished_jobs_\d{8}$'
    ORDER BY c.relname
  LOOP
    partition_day := to_date(substr(partition_name, 15), 'YYYYMMDD');
    EXIT WHEN (partition_day + 1)::timestamp AT TIME ZONE 'UTC' > prune_before;
    BEGIN
      EXECUTE format('DELETE FROM skiplock.job_steps s USING skiplock.%I f WHERE s.job_id = f.id', partition_name);
      EXECUTE format('DELETE FROM skiplock.job_links l USING skiplock.%I f WHERE l.job_id = f.id', partition_name);
      EXECUTE format('DROP TABLE skiplock.%I', partition_name);
      dropped := dropped + 1;
    EXCEPTION WHEN lock_not_available THEN
      NULL;
    END;
  END LOOP;

  -- Rows of days that had no partition go one by one, in a bounded batch
  -- (the next round takes the rest): normally there are none.
  WITH gone AS (
    DELETE FROM skiplock.finished_jobs_default
    WHERE ctid = ANY(ARRAY(SELECT ctid FROM skiplock.finished_jobs_default
                           WHERE finished_at < prune_before LIMIT 10000))
    RETURNING id
  ),
  steps AS (
    DELETE FROM skiplock.job_steps s USING gone g WHERE s.job_id = g.id
  ),
  links AS (
    DELETE FROM skiplock.job_links l USING gone g WHERE l.job_id = g.id
  )
  SELECT count(*) INTO deleted FROM gone;

  -- Events whose keep has passed, once a day with the day's history (a
  -- send drops those of its own name as it goes).
  IF dropped > 0 THEN
    DELETE FROM skiplock.events e WHERE e.expires_at <= now();
  END IF;
  RETURN NEXT;
END
$$;
