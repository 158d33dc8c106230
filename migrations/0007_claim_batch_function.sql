-- The claim as a function, so that its plan is made once per connection and
-- kept, whichever driver calls it: planning this statement takes longer than
-- running it for a small batch (2 ms against 0.5 ms for a claim of one), and
-- a prepared statement alone does not settle it, since Postgres keeps
-- planning afresh whenever its estimates favour a plan for the values at
-- hand. The function fixes the plan mode for its own statement only, so
-- nothing changes for the rest of the session (a pooled connection may be
-- someone else's next).
--
-- Parameters: $1 max jobs, $2 lease seconds (null: each job's own), $3 job
-- types (null: all), $4 queues (null: all), $5 tenant (null: all), $6 worker id.
--
-- Claims up to `max` ready jobs in one statement, fairly across tenants and
-- within every tenant's limits.
--
-- How:
-- 1. `waiting_tenants` walks the waiting-jobs index one tenant at a time (a
--    loose index scan), so its cost follows the number of tenants with work,
--    not the depth of the backlog. Its steps test nothing but what the index
--    holds, and order by the index's whole key: that keeps the plan an
--    ordered index scan whatever the statistics say (on a fresh table,
--    conditions on run_at or type made the planner sort every waiting job;
--    ordered by tenant alone, it may walk jobs_tenant_seq_idx, finished jobs
--    included).
-- 2. `tenant_load` keeps the tenants with a job this claim could take (ready,
--    unexpired, of the asked types and queues; a probe of that tenant's part
--    of the index), since the LIMITs below keep `max` tenants, which must not
--    be spent on tenants with nothing to give. It gives each its limits (its
--    own or the defaults: skiplock.tenant_limits) and its number of running
--    jobs. The tenant row that enqueue makes is what a claim locks.
-- 3. Tenants with a concurrency or rate limit are locked (`limited`, SKIP
--    LOCKED, in fairness order) and kept only if no other claim took jobs of
--    theirs after this statement's snapshot (claim_seq unchanged). Under READ
--    COMMITTED the running count comes from that snapshot; with the lock held
--    and claim_seq unchanged it cannot be low, so the limit holds however many
--    claimers run. Unlimited tenants take no lock: they claim like a plain
--    SKIP LOCKED queue.
-- 4. `picked` takes, per tenant, the first jobs in claim order (priority,
--    run_at, enqueue order), as many as the tenant may start.
-- 5. `chosen` orders those by (running + rank) / weight: weighted max-min
--    fairness over running slots, so the least-served tenant goes first and a
--    weight-3 tenant gets three turns per round; ties fall to a random draw so
--    equal tenants take turns across claims too. LIMIT max, materialized once:
--    this is what keeps the result at `max` rows (an UPDATE ... WHERE id IN
--    (SELECT ... LIMIT n FOR UPDATE SKIP LOCKED) may re-run its subquery and
--    take more).
-- 6. `locked` locks the chosen rows (SKIP LOCKED, state re-checked), `claimed`
--    starts them with a fresh lease token, `served` books the claim on the
--    limited tenants, and `events` records each claim.
CREATE FUNCTION skiplock.claim_batch(integer, integer, text[], text[], text, text)
RETURNS TABLE (job json, lease_token uuid)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH RECURSIVE waiting_tenants(tenant) AS (
    (SELECT tenant FROM skiplock.jobs
     WHERE state IN ('scheduled', 'queued', 'retrying') AND ($5::text IS NULL OR tenant = $5)
     ORDER BY tenant, priority DESC, run_at, seq LIMIT 1)
    UNION ALL
    SELECT (SELECT j.tenant FROM skiplock.jobs j
            WHERE j.state IN ('scheduled', 'queued', 'retrying') AND j.tenant > w.tenant
              AND ($5::text IS NULL OR j.tenant = $5)
            ORDER BY j.tenant, j.priority DESC, j.run_at, j.seq LIMIT 1)
    FROM waiting_tenants w WHERE w.tenant IS NOT NULL
  ),
  tenant_load AS MATERIALIZED (
    SELECT w.tenant, t.claim_seq, t.concurrency, t.rate_count, t.rate_per_seconds, t.weight,
           (SELECT count(*) FROM skiplock.jobs r WHERE r.tenant = w.tenant AND r.state = 'running') AS running,
           random() AS tiebreak
    FROM waiting_tenants w
    JOIN skiplock.tenant_limits t ON t.name = w.tenant
    WHERE EXISTS (
      SELECT 1 FROM skiplock.jobs j
      WHERE j.tenant = w.tenant AND j.state IN ('scheduled', 'queued', 'retrying')
        AND j.run_at <= now() AND (j.expires_at IS NULL OR j.expires_at > now())
        AND ($3::text[] IS NULL OR j.type = ANY($3)) AND ($4::text[] IS NULL OR j.queue = ANY($4)))
  ),
  limited AS MATERIALIZED (
    SELECT t.name, t.claim_seq, t.window_started_at, t.window_claims
    FROM skiplock.tenants t
    JOIN tenant_load l ON l.tenant = t.name
    WHERE (l.concurrency IS NOT NULL OR l.rate_count IS NOT NULL)
      AND (l.concurrency IS NULL OR l.running < l.concurrency)
    ORDER BY l.running::float8 / l.weight, l.tiebreak
    LIMIT $1
    FOR UPDATE OF t SKIP LOCKED
  ),
  capacity AS MATERIALIZED (
    SELECT l.tenant, l.weight, l.running, l.tiebreak,
           least($1::integer,
                 coalesce(l.concurrency - l.running, $1),
                 coalesce(l.rate_count - CASE
                   WHEN m.window_started_at > now() - make_interval(secs => l.rate_per_seconds)
                   THEN m.window_claims ELSE 0 END, $1)) AS free
    FROM tenant_load l
    LEFT JOIN limited m ON m.name = l.tenant
    WHERE (l.concurrency IS NULL AND l.rate_count IS NULL)
       OR m.claim_seq = l.claim_seq
    ORDER BY l.running::float8 / l.weight, l.tiebreak
    LIMIT $1
  ),
  picked AS MATERIALIZED (
    SELECT p.id, c.tenant, (c.running + p.rank)::float8 / c.weight AS turn, c.tiebreak, p.rank
    FROM capacity c
    CROSS JOIN LATERAL (
      SELECT j.id, row_number() OVER (ORDER BY j.priority DESC, j.run_at, j.seq) AS rank
      FROM skiplock.jobs j
      WHERE j.tenant = c.tenant
        AND j.state IN ('scheduled', 'queued', 'retrying')
        AND j.run_at <= now()
        AND (j.expires_at IS NULL OR j.expires_at > now())
        AND ($3::text[] IS NULL OR j.type = ANY($3))
        AND ($4::text[] IS NULL OR j.queue = ANY($4))
      ORDER BY j.priority DESC, j.run_at, j.seq
      LIMIT c.free
    ) p
    WHERE c.free > 0
  ),
  chosen AS MATERIALIZED (
    SELECT id, row_number() OVER (ORDER BY turn, tiebreak, rank) AS position
    FROM picked ORDER BY turn, tiebreak, rank LIMIT $1
  ),
  locked AS MATERIALIZED (
    -- One lookup by key per chosen job: a semi-join, or a list of keys beside
    -- the state condition, lets the planner read the whole waiting index.
    SELECT l.id FROM chosen CROSS JOIN LATERAL (
      SELECT j.id FROM skiplock.jobs j
      WHERE j.id = chosen.id AND j.state IN ('scheduled', 'queued', 'retrying')
      FOR UPDATE SKIP LOCKED
    ) l
  ),
  claimed AS (
    UPDATE skiplock.jobs j
    SET state = 'running', attempts = j.attempts + 1, worker_id = $6,
        lease_token = gen_random_uuid(),
        lease_expires_at = now() + make_interval(secs => coalesce($2::integer, j.lease_seconds)),
        started_at = now(), first_started_at = coalesce(j.first_started_at, now()),
        cancel_requested_at = NULL
    -- An array, not a join: the planner then finds each row by its key, where
    -- a join estimated at max rows may hash the whole table.
    WHERE j.id = ANY(ARRAY(SELECT id FROM locked))
    RETURNING j.id, j.tenant, j.attempts, j.lease_token, skiplock.job_json(j) AS job
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
    FROM (SELECT tenant, count(*)::integer AS claims FROM claimed GROUP BY tenant) n
    JOIN tenant_load l ON l.tenant = n.tenant
    WHERE t.name = n.tenant AND t.name IN (SELECT name FROM limited)
  ),
  events AS (
    INSERT INTO skiplock.job_events (job_id, kind, attempt, worker_id, detail)
    SELECT id, 'claimed', attempts, $6, NULL FROM claimed
  )
  SELECT claimed.job, claimed.lease_token FROM claimed JOIN chosen USING (id) ORDER BY chosen.position;
END
$$;
