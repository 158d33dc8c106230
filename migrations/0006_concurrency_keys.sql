-- skiplock 0006: concurrency keys and ordering keys.
--
-- A job may name a key of its tenant's choosing (an account, a store, an
-- order) and a number of slots: at most that many jobs of the key are past
-- their turn (waiting to start, running, retrying or parked) at once, and
-- the key's other jobs are `held`, outside every state a claim looks at,
-- until a slot frees. An ordering key is a key of one slot whose jobs take
-- their turns in enqueue order; a head that fails for good may hold the key
-- until an operator acts.
--
-- The turns are given where jobs enter and leave the jobs table, never in
-- the claim: a claim cannot start a held job, so no number of claimers can
-- run more of a key than it has slots, and the claim's statement is the one
-- it was, whatever number of keys or held jobs there are.
-- - Entering (an enqueue, a retry of a finished job, a child, a flow's
--   job): the job's row in keyed_jobs has no slot yet, and the statement
--   trigger jobs_inserted_take_key_slots gives the key's free slots out, in
--   id order (enqueue order), under the key's row lock; the rest are held.
-- - Leaving (any end: the move to finished_jobs): the trigger
--   finished_jobs_release_key_slots gives the slot back and fills it from
--   the key's held jobs, in id order.

-- ---------------------------------------------------------------------------
-- The held state
-- ---------------------------------------------------------------------------

ALTER TABLE skiplock.jobs DROP CONSTRAINT jobs_state_live;
ALTER TABLE skiplock.jobs ADD CONSTRAINT jobs_state_live
  CHECK (state IN ('scheduled', 'queued', 'retrying', 'running', 'parked', 'held')) NOT VALID;
ALTER TABLE skiplock.jobs VALIDATE CONSTRAINT jobs_state_live;

-- A new job is held in the statement that enqueued it (no other
-- transaction ever sees it waiting); a held one waits when its turn comes.
CREATE OR REPLACE FUNCTION skiplock.is_legal_transition(from_state text, to_state text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  RETURN (from_state, to_state) IN (
    ('scheduled', 'running'), ('queued', 'running'), ('retrying', 'running'),
    ('running', 'scheduled'), ('running', 'queued'), ('running', 'retrying'),
    ('scheduled', 'queued'), ('queued', 'scheduled'), ('retrying', 'queued'), ('retrying', 'scheduled'),
    ('running', 'parked'), ('scheduled', 'parked'), ('parked', 'scheduled'), ('parked', 'queued'),
    ('queued', 'held'), ('scheduled', 'held'), ('held', 'queued'), ('held', 'scheduled'));
END
$$;

-- The status the API shows: a held job is queued (or scheduled, by its
-- run_at), as a parked one is; the job says which key it waits for.
CREATE OR REPLACE FUNCTION skiplock.job_status(state text, run_at timestamptz) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN state IN ('scheduled', 'queued', 'retrying', 'parked', 'held') AND run_at <= now() THEN 'queued'
    WHEN state IN ('scheduled', 'queued', 'parked', 'held') THEN 'scheduled'
    ELSE state
  END
$$;

ALTER TABLE skiplock.job_events DROP CONSTRAINT job_events_kind_known;
ALTER TABLE skiplock.job_events ADD CONSTRAINT job_events_kind_known CHECK (kind IN
  ('lease_extended', 'failed', 'retried', 'released', 'cancel_requested', 'cancelled', 'expired',
   'lease_expired', 'rescheduled', 'callback_enqueued', 'parked', 'resumed', 'held')) NOT VALID;
ALTER TABLE skiplock.job_events VALIDATE CONSTRAINT job_events_kind_known;

-- ---------------------------------------------------------------------------
-- Keys and their jobs
-- ---------------------------------------------------------------------------

-- One row per key in use (made by the first job that names it, dropped when
-- its last job has ended): its settings, as its latest job gave them, and
-- the slots taken. Every change to a key's slots is made under this row's
-- lock, and writes the row, so a transaction under an older snapshot
-- (REPEATABLE READ) that would count them wrong fails to serialize instead.
CREATE TABLE skiplock.concurrency_keys (
  tenant     text        NOT NULL,
  key        text        NOT NULL,
  -- An ordering key: one slot, turns in enqueue order.
  ordered    boolean     NOT NULL,
  slots      integer     NOT NULL,
  -- For an ordering key, what its jobs do when its head fails for good:
  -- 'hold' (wait for an operator: skiplock.unblock_key, or a retry of the
  -- head) or 'continue'.
  on_failure text        NOT NULL,
  taken      integer     NOT NULL DEFAULT 0,
  -- The failed head that holds the key, and since when.
  blocked_by uuid,
  blocked_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (tenant, key),
  CONSTRAINT concurrency_keys_slots_range CHECK (slots BETWEEN 1 AND 1000),
  CONSTRAINT concurrency_keys_taken_positive CHECK (taken >= 0),
  CONSTRAINT concurrency_keys_ordered_one_slot CHECK (NOT ordered OR slots = 1),
  CONSTRAINT concurrency_keys_on_failure_known CHECK (on_failure IN ('hold', 'continue'))
);
CREATE INDEX concurrency_keys_blocked_idx ON skiplock.concurrency_keys (blocked_at) WHERE blocked_by IS NOT NULL;

-- The key of each job that names one, from its enqueue on (kept after it
-- ends, so a retry takes its key again and the history shows it): `slot` is
-- null until the job's insert is settled, then 'taken' (its turn),
-- 'waiting' (held) or, once it has ended, 'released'. A row of its own
-- rather than a column of jobs, whose rows the history copies column by
-- column.
CREATE TABLE skiplock.keyed_jobs (
  job_id     uuid    PRIMARY KEY,
  tenant     text    NOT NULL,
  key        text    NOT NULL,
  ordered    boolean NOT NULL,
  slots      integer NOT NULL,
  on_failure text    NOT NULL,
  slot       text,
  CONSTRAINT keyed_jobs_key_length CHECK (length(key) BETWEEN 1 AND 256),
  CONSTRAINT keyed_jobs_slots_range CHECK (slots BETWEEN 1 AND 1000),
  CONSTRAINT keyed_jobs_ordered_one_slot CHECK (NOT ordered OR slots = 1),
  CONSTRAINT keyed_jobs_on_failure_known CHECK (on_failure IN ('hold', 'continue')),
  CONSTRAINT keyed_jobs_slot_known CHECK (slot IN ('taken', 'waiting', 'released'))
);
-- Jobs just inserted, not settled yet: empty between statements.
CREATE INDEX keyed_jobs_unsettled_idx ON skiplock.keyed_jobs (tenant, key) WHERE slot IS NULL;
-- A key's jobs without a slot (held, or just inserted) in turn order.
CREATE INDEX keyed_jobs_turn_idx ON skiplock.keyed_jobs (tenant, key, job_id) WHERE slot IS NULL OR slot = 'waiting';
-- Live keyed jobs, which an end looks up.
CREATE INDEX keyed_jobs_live_idx ON skiplock.keyed_jobs (job_id) WHERE slot IN ('taken', 'waiting');

-- Gives the free slots of the keys named (by tenant and key, in pairs) to
-- their oldest jobs without one (held, or just inserted), and holds the
-- just-inserted ones left over. The caller holds the keys' row locks. A
-- held job locked by another transaction (being cancelled, say) is passed
-- over, and for an ordering key so is everything after it: that
-- transaction fills the key again when it ends the job. Set-based: an
-- enqueue or a completion touches many keys at once.
CREATE FUNCTION skiplock.fill_key_slots(key_tenants text[], key_names text[]) RETURNS void
LANGUAGE plpgsql
-- Planned once per connection: planning its statements afresh for each
-- call's arrays cost more than running them.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
  turned integer;
BEGIN
  WITH keys AS MATERIALIZED (
    SELECT c.tenant, c.key, c.ordered, c.slots - c.taken AS free
    FROM unnest(key_tenants, key_names) AS u(tenant, key)
    JOIN skiplock.concurrency_keys c ON c.tenant = u.tenant AND c.key = u.key
    WHERE c.blocked_by IS NULL AND c.taken < c.slots
  ),
  turn AS MATERIALIZED (
    SELECT k.tenant, k.key, k.ordered, t.job_id FROM keys k CROSS JOIN LATERAL (
      SELECT kj.job_id FROM skiplock.keyed_jobs kj
      WHERE kj.tenant = k.tenant AND kj.key = k.key AND (kj.slot IS NULL OR kj.slot = 'waiting')
      ORDER BY kj.job_id LIMIT k.free) t
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
  SELECT count(*) INTO turned FROM woken;
  IF turned > 0 AND skiplock.anyone_listening() THEN
    PERFORM pg_notify('skiplock_jobs', '');
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
                                           ELSE 'its key has no free slot' END)
  FROM moved m JOIN skiplock.concurrency_keys c ON c.tenant = m.tenant AND c.key = m.key;
END
$$;

-- The insert trigger: settles the keyed jobs the statement inserted. Their
-- keys' rows are made or locked in key order (so two enqueues lock keys in
-- one order), with the latest job's settings. One index probe for a
-- statement without keyed jobs.
CREATE FUNCTION skiplock.take_key_slots() RETURNS trigger
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
    SELECT DISTINCT ON (kj.tenant, kj.key) kj.tenant, kj.key, kj.ordered, kj.slots, kj.on_failure
    FROM skiplock.keyed_jobs kj WHERE kj.slot IS NULL
    ORDER BY kj.tenant, kj.key, kj.job_id DESC
  ),
  made AS (
    INSERT INTO skiplock.concurrency_keys AS c (tenant, key, ordered, slots, on_failure)
    SELECT l.tenant, l.key, l.ordered, l.slots, l.on_failure FROM latest l ORDER BY l.tenant, l.key
    ON CONFLICT (tenant, key) DO UPDATE SET slots = EXCLUDED.slots, on_failure = EXCLUDED.on_failure
    RETURNING c.tenant, c.key
  )
  SELECT array_agg(m.tenant ORDER BY m.tenant, m.key), array_agg(m.key ORDER BY m.tenant, m.key)
  INTO key_tenants, key_names FROM made m;

  SELECT kj.tenant, kj.key, kj.ordered INTO mixed
  FROM skiplock.keyed_jobs kj JOIN skiplock.concurrency_keys c ON c.tenant = kj.tenant AND c.key = kj.key
  WHERE kj.slot IS NULL AND c.ordered <> kj.ordered
  LIMIT 1;
  IF FOUND THEN
    PERFORM skiplock.refuse(CASE WHEN mixed.ordered THEN 'ordering_key' ELSE 'concurrency_key' END,
      format('%s is in use as %s key of tenant %s; a key is one or the other', mixed.key,
             CASE WHEN mixed.ordered THEN 'a concurrency' ELSE 'an ordering' END, mixed.tenant));
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

CREATE TRIGGER jobs_inserted_take_key_slots
  AFTER INSERT ON skiplock.jobs
  FOR EACH STATEMENT EXECUTE FUNCTION skiplock.take_key_slots();

-- The end trigger: the ended jobs' slots go back to their keys (a held job
-- that ends, cancelled, had none), and the keys fill them again, unless the
-- ended job was an ordering key's head that failed for good (or expired)
-- and the key says 'hold'. A key with nothing left is dropped; its next job
-- makes it again. It runs under its callers' planner settings
-- (complete_jobs turns nested loops off) unless it sets its own.
CREATE FUNCTION skiplock.release_key_slots() RETURNS trigger
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
  IF NOT EXISTS (SELECT 1 FROM skiplock.keyed_jobs kj WHERE kj.slot IN ('taken', 'waiting')) THEN
    RETURN NULL;
  END IF;
  -- A job's slot cannot change under this: giving it a turn locks its row,
  -- which the statement that ended it holds.
  SELECT array_agg(f.id) INTO ended
  FROM finished f JOIN skiplock.keyed_jobs kj ON kj.job_id = f.id
  WHERE kj.slot IN ('taken', 'waiting');
  SELECT array_agg(e.tenant ORDER BY e.tenant, e.key), array_agg(e.key ORDER BY e.tenant, e.key),
         array_agg(e.freed ORDER BY e.tenant, e.key), array_agg(e.failed_head ORDER BY e.tenant, e.key)
  INTO key_tenants, key_names, freed, failed_heads
  FROM (
    SELECT kj.tenant, kj.key, count(*) FILTER (WHERE kj.slot = 'taken')::integer AS freed,
           (array_agg(kj.job_id ORDER BY kj.job_id)
              FILTER (WHERE kj.slot = 'taken' AND f.state IN ('failed', 'expired')))[1] AS failed_head
    FROM finished f JOIN skiplock.keyed_jobs kj ON kj.job_id = f.id
    WHERE kj.slot IN ('taken', 'waiting')
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
  DELETE FROM skiplock.concurrency_keys c
  USING unnest(key_tenants, key_names) AS u(tenant, key)
  WHERE c.tenant = u.tenant AND c.key = u.key AND c.taken = 0 AND c.blocked_by IS NULL
    AND NOT EXISTS (SELECT 1 FROM skiplock.keyed_jobs kj
                    WHERE kj.tenant = c.tenant AND kj.key = c.key AND kj.slot = 'waiting');
  RETURN NULL;
END
$$;

CREATE TRIGGER finished_jobs_release_key_slots
  AFTER INSERT ON skiplock.finished_jobs
  REFERENCING NEW TABLE AS finished
  FOR EACH STATEMENT
  EXECUTE FUNCTION skiplock.release_key_slots();

-- Lets a key held by its failed head go on: its next job takes the turn.
-- True when the key was held.
CREATE FUNCTION skiplock.unblock_key(tenant text, key text) RETURNS boolean
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  UPDATE skiplock.concurrency_keys c SET blocked_by = NULL, blocked_at = NULL
  WHERE c.tenant = unblock_key.tenant AND c.key = unblock_key.key AND c.blocked_by IS NOT NULL;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  PERFORM skiplock.fill_key_slots(ARRAY[unblock_key.tenant], ARRAY[unblock_key.key]);
  DELETE FROM skiplock.concurrency_keys c
  WHERE c.tenant = unblock_key.tenant AND c.key = unblock_key.key AND c.taken = 0
    AND NOT EXISTS (SELECT 1 FROM skiplock.keyed_jobs kj
                    WHERE kj.tenant = unblock_key.tenant AND kj.key = unblock_key.key AND kj.slot = 'waiting');
  RETURN true;
END
$$;

-- ---------------------------------------------------------------------------
-- Enqueueing with a key
-- ---------------------------------------------------------------------------

-- 0001's enqueue_jobs, taking `concurrencyKey` (with `concurrencyLimit`,
-- default 1) or `orderingKey` (with `orderingOnFailure`, default 'hold'):
-- a batch that names a key goes the dedup path's way, which also writes
-- each inserted keyed job's row in keyed_jobs for the insert trigger.
CREATE OR REPLACE FUNCTION skiplock.enqueue_jobs(jobs jsonb)
RETURNS TABLE (
  id uuid, queue text, type text, tenant text, status text, priority integer, payload jsonb,
  "maxAttempts" integer, "leaseSeconds" integer, "runAt" json, "expiresAt" json, "dedupKey" text,
  "createdAt" json, "callbackUrl" text, "failureCallbackUrl" text,
  -- A dedup hit: no job was inserted, and this job holds the key (heldJob
  -- is null when it committed after this statement began: read it again).
  deduplicated boolean, "heldBy" uuid, "heldJob" json)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
  IF NOT jobs @? '$[*] ? (@.dedupKey != null || @.concurrencyKey != null || @.orderingKey != null)' THEN
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
    SELECT (w.job).*, false, NULL::uuid, NULL::json FROM written w ORDER BY (w.job).id;
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
    INSERT INTO skiplock.keyed_jobs (job_id, tenant, key, ordered, slots, on_failure)
    SELECT i.id, i.tenant, coalesce(e.job->>'orderingKey', e.job->>'concurrencyKey'), e.job ? 'orderingKey',
           CASE WHEN e.job ? 'orderingKey' THEN 1 ELSE coalesce((e.job->>'concurrencyLimit')::integer, 1) END,
           coalesce(e.job->>'orderingOnFailure', CASE WHEN e.job ? 'orderingKey' THEN 'hold' ELSE 'continue' END)
    FROM input i
    JOIN jsonb_array_elements(jobs) WITH ORDINALITY AS e(job, ordinal) ON e.ordinal = i.ordinal
    WHERE coalesce(e.job->>'orderingKey', e.job->>'concurrencyKey') IS NOT NULL
      AND i.id IN (SELECT (w.job).id FROM written w)
  )
  -- Each input finds its new row by the id it was given, or else (deduplicated)
  -- the job that holds its key: equality joins the planner can hash, and a
  -- lookup by id for each dedup hit only.
  SELECT (inserted.job).*, inserted.job IS NULL AS deduplicated, key.job_id AS "heldBy",
         CASE WHEN inserted.job IS NULL AND key.job_id IS NOT NULL THEN
           (SELECT skiplock.job_json(a) FROM skiplock.all_jobs a WHERE a.id = key.job_id) END AS "heldJob"
  FROM input i
  LEFT JOIN written inserted ON (inserted.job).id = i.id
  LEFT JOIN keys key
    ON inserted.job IS NULL AND key.tenant = i.tenant AND key.queue = i.queue AND key.dedup_key = i.dedup_key
  ORDER BY i.ordinal;
END
$$;

-- 0001's enqueue with a key: concurrency_key (and concurrency_limit,
-- default 1) or ordering_key (and ordering_on_failure, 'hold' or
-- 'continue', default 'hold').
--
--   SELECT skiplock.enqueue('shopify-sync', '{"store": "acme"}', tenant => 'acme',
--                           concurrency_key => 'store:acme', concurrency_limit => 2)->>'id';
DROP FUNCTION skiplock.enqueue(text, jsonb, text, text, integer, timestamptz, interval, integer, integer, timestamptz,
                               text, integer, real, real, text, text);
CREATE FUNCTION skiplock.enqueue(
  queue                text,
  payload              jsonb       DEFAULT 'null',
  tenant               text        DEFAULT 'default',
  type                 text        DEFAULT NULL,
  priority             integer     DEFAULT NULL,
  run_at               timestamptz DEFAULT NULL,
  delay                interval    DEFAULT NULL,
  max_attempts         integer     DEFAULT NULL,
  lease_seconds        integer     DEFAULT NULL,
  expires_at           timestamptz DEFAULT NULL,
  dedup_key            text        DEFAULT NULL,
  dedup_window_seconds integer     DEFAULT NULL,
  backoff_base_seconds real        DEFAULT NULL,
  backoff_max_seconds  real        DEFAULT NULL,
  callback_url         text        DEFAULT NULL,
  failure_callback_url text        DEFAULT NULL,
  concurrency_key      text        DEFAULT NULL,
  concurrency_limit    integer     DEFAULT NULL,
  ordering_key         text        DEFAULT NULL,
  ordering_on_failure  text        DEFAULT NULL)
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
  ELSIF concurrency_key IS NOT NULL AND ordering_key IS NOT NULL THEN
    PERFORM skiplock.refuse('ordering_key', 'give concurrency_key or ordering_key, not both');
  ELSIF length(concurrency_key) NOT BETWEEN 1 AND 256 THEN
    PERFORM skiplock.refuse('concurrency_key', 'a key of 1 to 256 characters, or null');
  ELSIF length(ordering_key) NOT BETWEEN 1 AND 256 THEN
    PERFORM skiplock.refuse('ordering_key', 'a key of 1 to 256 characters, or null');
  ELSIF concurrency_limit NOT BETWEEN 1 AND 1000 OR (concurrency_limit IS NOT NULL AND concurrency_key IS NULL) THEN
    PERFORM skiplock.refuse('concurrency_limit', format('from 1 to 1000, with a concurrency_key, not %s', concurrency_limit));
  ELSIF ordering_on_failure NOT IN ('hold', 'continue') OR (ordering_on_failure IS NOT NULL AND ordering_key IS NULL) THEN
    PERFORM skiplock.refuse('ordering_on_failure', format('hold or continue, with an ordering_key, not %s', ordering_on_failure));
  END IF;
  start_at := coalesce(run_at, now() + coalesce(delay, interval '0'));
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
      IF coalesce(concurrency_key, ordering_key) IS NOT NULL THEN
        INSERT INTO skiplock.keyed_jobs (job_id, tenant, key, ordered, slots, on_failure)
        VALUES (new_id, tenant, coalesce(ordering_key, concurrency_key), ordering_key IS NOT NULL,
                CASE WHEN ordering_key IS NOT NULL THEN 1 ELSE coalesce(concurrency_limit, 1) END,
                coalesce(ordering_on_failure, CASE WHEN ordering_key IS NOT NULL THEN 'hold' ELSE 'continue' END));
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
      -- Read after the insert trigger has settled the job's turn.
      SELECT skiplock.job_json(j) INTO enqueued FROM skiplock.jobs j WHERE j.id = new_id;
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

-- 0005's enqueue_flow, refusing keys: a flow's dependents are parked from
-- the start, and a held job cannot be.
CREATE OR REPLACE FUNCTION skiplock.enqueue_flow(jobs jsonb, dependencies jsonb)
RETURNS SETOF json
LANGUAGE plpgsql AS $$
DECLARE
  ids uuid[];
BEGIN
  IF jobs @? '$[*] ? (@.concurrencyKey != null || @.orderingKey != null)' THEN
    PERFORM skiplock.refuse('jobs', 'a job of a flow cannot name a concurrency key or an ordering key');
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

-- 0002's reschedule, keeping a held job held: its priority and time change,
-- and it waits for its key's turn as before.
CREATE OR REPLACE FUNCTION skiplock.reschedule(
  job_id uuid, priority integer DEFAULT NULL, run_at timestamptz DEFAULT NULL, delay interval DEFAULT NULL,
  only_tenant text DEFAULT NULL)
RETURNS TABLE (job json, outcome text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  IF reschedule.priority NOT BETWEEN -1000 AND 1000 THEN
    PERFORM skiplock.refuse('priority', format('must be from -1000 to 1000, not %s', reschedule.priority));
  ELSIF reschedule.run_at IS NOT NULL AND reschedule.delay IS NOT NULL THEN
    PERFORM skiplock.refuse('delay', 'give run_at or delay, not both');
  ELSIF reschedule.delay < interval '0' THEN
    PERFORM skiplock.refuse('delay', format('must not be negative, not %s', reschedule.delay));
  END IF;
  RETURN QUERY
  WITH target AS MATERIALIZED (
    SELECT j.id, j.state, j.priority, j.run_at, j.expires_at,
           coalesce(reschedule.priority::smallint, j.priority) AS new_priority,
           CASE WHEN reschedule.run_at IS NULL AND reschedule.delay IS NULL THEN j.run_at
                ELSE greatest(coalesce(reschedule.run_at, now() + reschedule.delay), now()) END AS new_run_at
    FROM skiplock.jobs j
    WHERE j.id = reschedule.job_id AND (only_tenant IS NULL OR j.tenant = only_tenant)
    FOR UPDATE
  ),
  changed AS (
    UPDATE skiplock.jobs j
    SET priority = t.new_priority,
        run_at = t.new_run_at,
        state = CASE WHEN (reschedule.run_at IS NULL AND reschedule.delay IS NULL) OR j.state IN ('retrying', 'held')
                     THEN j.state
                     WHEN t.new_run_at > now() THEN 'scheduled' ELSE 'queued' END
    FROM target t
    WHERE j.id = t.id AND t.state <> 'running' AND (t.expires_at IS NULL OR t.new_run_at < t.expires_at)
    RETURNING j.id, j.attempts, skiplock.job_json(j) AS job
  ),
  events AS (
    INSERT INTO skiplock.job_events (job_id, kind, attempt, detail)
    SELECT c.id, 'rescheduled', c.attempts,
           jsonb_build_object('from', jsonb_build_object('priority', t.priority, 'runAt', skiplock.iso(t.run_at)),
                              'to', jsonb_build_object('priority', t.new_priority, 'runAt', skiplock.iso(t.new_run_at)))
    FROM changed c JOIN target t ON t.id = c.id
  )
  SELECT c.job, 'rescheduled'::text FROM changed c
  UNION ALL
  SELECT skiplock.job_json(j), CASE WHEN t.state = 'running' THEN 'not_waiting' ELSE 'after_expiry' END
  FROM target t JOIN skiplock.jobs j ON j.id = t.id
  WHERE NOT EXISTS (SELECT 1 FROM changed);
END
$$;
