-- skiplock schema, version 1.
--
-- Layout: one jobs table. Waiting and running jobs are found through partial
-- indexes that cover only those rows, so a deep retention of finished jobs
-- does not slow claiming; finished rows are pruned in bounded batches.
-- Every change of a job is also appended to job_events, so a job's history
-- can be read in SQL after the job itself is pruned.

CREATE SCHEMA IF NOT EXISTS skiplock;

-- UUIDv7: time-ordered (good index locality) and still unguessable (74 random
-- bits). Postgres 18 has uuidv7(); this works from 13 on.
CREATE FUNCTION skiplock.uuid_v7() RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
  SELECT encode(
    set_bit(set_bit(
      overlay(uuid_send(gen_random_uuid())
              placing substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
              FROM 1 FOR 6),
      52, 1), 53, 1),
    'hex')::uuid
$$;

CREATE TABLE skiplock.jobs (
  id                   uuid        PRIMARY KEY DEFAULT skiplock.uuid_v7(),
  -- Enqueue order: ids made in the same millisecond are not ordered, this is.
  seq                  bigint      GENERATED ALWAYS AS IDENTITY UNIQUE,
  queue                text        NOT NULL,
  type                 text        NOT NULL,
  tenant               text        NOT NULL DEFAULT 'default',
  payload              jsonb       NOT NULL DEFAULT 'null',
  priority             integer     NOT NULL DEFAULT 0,
  -- The stored state; the API shows a waiting job as scheduled, queued or
  -- retrying depending on run_at (skiplock.job_status).
  state                text        NOT NULL DEFAULT 'queued',
  run_at               timestamptz NOT NULL DEFAULT now(),
  attempts             integer     NOT NULL DEFAULT 0,
  max_attempts         integer     NOT NULL DEFAULT 5,
  -- The per-job timeout: how long one claim owns the job without a heartbeat.
  lease_seconds        integer     NOT NULL DEFAULT 60,
  backoff_base_seconds real        NOT NULL DEFAULT 1,
  backoff_max_seconds  real        NOT NULL DEFAULT 3600,
  expires_at           timestamptz,
  dedup_key            text,
  dedup_window_seconds integer     NOT NULL DEFAULT 0,
  progress             jsonb,
  result               jsonb,
  last_error           jsonb,
  worker_id            text,
  -- Fencing token: a new one per claim; every change by a worker must present it.
  lease_token          uuid,
  lease_expires_at     timestamptz,
  cancel_requested_at  timestamptz,
  created_at           timestamptz NOT NULL DEFAULT now(),
  first_started_at     timestamptz,
  started_at           timestamptz,
  finished_at          timestamptz,
  duration_ms          integer,
  CONSTRAINT jobs_state_known CHECK (state IN
    ('scheduled', 'queued', 'running', 'retrying', 'succeeded', 'failed', 'cancelled', 'expired')),
  CONSTRAINT jobs_running_has_lease CHECK (state <> 'running' OR (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)),
  CONSTRAINT jobs_priority_range CHECK (priority BETWEEN -1000 AND 1000),
  CONSTRAINT jobs_attempts_range CHECK (max_attempts BETWEEN 1 AND 1000 AND attempts >= 0),
  CONSTRAINT jobs_lease_range CHECK (lease_seconds BETWEEN 1 AND 86400),
  CONSTRAINT jobs_names_length CHECK (length(queue) BETWEEN 1 AND 128 AND length(type) BETWEEN 1 AND 128 AND length(tenant) BETWEEN 1 AND 128)
) WITH (fillfactor = 80);

-- Claiming: per tenant, in claim order. Covers only waiting rows.
CREATE INDEX jobs_waiting_idx ON skiplock.jobs (tenant, priority DESC, run_at, seq)
  WHERE state IN ('scheduled', 'queued', 'retrying');
-- Running jobs per tenant (concurrency and fairness) and expired leases (the reaper).
CREATE INDEX jobs_running_idx ON skiplock.jobs (tenant) WHERE state = 'running';
CREATE INDEX jobs_lease_idx ON skiplock.jobs (lease_expires_at) WHERE state = 'running';
-- Jobs that must expire before they ever start.
CREATE INDEX jobs_expiring_idx ON skiplock.jobs (expires_at)
  WHERE expires_at IS NOT NULL AND state IN ('scheduled', 'queued', 'retrying');
-- Retention and recent throughput.
CREATE INDEX jobs_finished_idx ON skiplock.jobs (finished_at)
  WHERE state IN ('succeeded', 'failed', 'cancelled', 'expired');
-- Deduplication is a unique index, so concurrent enqueues cannot both win.
-- A finished job keeps its key only for its dedup window.
CREATE UNIQUE INDEX jobs_dedup_idx ON skiplock.jobs (queue, dedup_key) WHERE dedup_key IS NOT NULL;
-- Listing, newest first, per queue and per tenant.
CREATE INDEX jobs_queue_seq_idx ON skiplock.jobs (queue, seq);
CREATE INDEX jobs_tenant_seq_idx ON skiplock.jobs (tenant, seq);

-- The legal state transitions. The trigger below refuses every other one,
-- whoever issues the UPDATE.
CREATE TABLE skiplock.job_transitions (
  from_state text NOT NULL,
  to_state   text NOT NULL,
  PRIMARY KEY (from_state, to_state)
);
INSERT INTO skiplock.job_transitions (from_state, to_state) VALUES
  ('scheduled', 'queued'), ('scheduled', 'running'), ('scheduled', 'cancelled'), ('scheduled', 'expired'),
  ('queued', 'scheduled'), ('queued', 'running'), ('queued', 'cancelled'), ('queued', 'expired'),
  ('retrying', 'queued'), ('retrying', 'running'), ('retrying', 'cancelled'), ('retrying', 'expired'),
  ('running', 'succeeded'), ('running', 'failed'), ('running', 'retrying'), ('running', 'cancelled'),
  ('running', 'queued'), ('running', 'scheduled'), ('running', 'expired'),
  ('failed', 'queued'), ('cancelled', 'queued'), ('expired', 'queued');

-- Besides refusing illegal transitions, the trigger keeps the bookkeeping
-- that every transition into a final state needs, whoever makes it: the
-- finish time and duration, and the release of the dedup key once the job is
-- finished and has no dedup window.
CREATE FUNCTION skiplock.on_job_transition() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM skiplock.job_transitions
                 WHERE from_state = OLD.state AND to_state = NEW.state) THEN
    RAISE EXCEPTION 'illegal job state transition: % -> %', OLD.state, NEW.state
      USING ERRCODE = 'check_violation', DETAIL = format('job %s', OLD.id),
            CONSTRAINT = 'job_transitions';
  END IF;
  IF NEW.state IN ('succeeded', 'failed', 'cancelled', 'expired') THEN
    NEW.finished_at := now();
    NEW.duration_ms := CASE WHEN NEW.started_at IS NOT NULL
      THEN (extract(epoch FROM now() - NEW.started_at) * 1000)::integer END;
    IF NEW.dedup_window_seconds = 0 THEN NEW.dedup_key := NULL; END IF;
  ELSIF OLD.state IN ('succeeded', 'failed', 'cancelled', 'expired') THEN
    NEW.finished_at := NULL;
    NEW.duration_ms := NULL;
  END IF;
  RETURN NEW;
END
$$;

CREATE TRIGGER jobs_on_transition
  BEFORE UPDATE OF state ON skiplock.jobs
  FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
  EXECUTE FUNCTION skiplock.on_job_transition();

-- Append-only history. No foreign key, so appending stays one cheap insert;
-- pruning a job removes its events in the same statement.
CREATE TABLE skiplock.job_events (
  id        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  job_id    uuid        NOT NULL,
  -- The wall clock when the row is written, not the transaction's start: a
  -- statement's start can precede the commit it waited to see, and then the
  -- history would show a claim before the completion that freed its slot.
  at        timestamptz NOT NULL DEFAULT clock_timestamp(),
  kind      text        NOT NULL,
  attempt   integer     NOT NULL,
  worker_id text,
  detail    jsonb,
  CONSTRAINT job_events_kind_known CHECK (kind IN
    ('enqueued', 'claimed', 'lease_extended', 'completed', 'failed', 'retried', 'released',
     'cancel_requested', 'cancelled', 'expired', 'lease_expired'))
);
CREATE INDEX job_events_job_idx ON skiplock.job_events (job_id, id);
CREATE INDEX job_events_at_idx ON skiplock.job_events (at);

CREATE FUNCTION skiplock.refuse_event_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'skiplock.job_events is append-only' USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER job_events_append_only
  BEFORE UPDATE ON skiplock.job_events
  FOR EACH ROW EXECUTE FUNCTION skiplock.refuse_event_change();

-- Tenant settings and the claim bookkeeping that enforces them. A row is made
-- when a tenant first enqueues; has_settings says whether its own limits
-- apply or the defaults do.
CREATE TABLE skiplock.tenants (
  name              text        PRIMARY KEY,
  has_settings      boolean     NOT NULL DEFAULT false,
  concurrency       integer     CHECK (concurrency >= 0),
  rate_count        integer     CHECK (rate_count >= 0),
  rate_per_seconds  integer     CHECK (rate_per_seconds >= 1),
  weight            integer     NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000),
  -- Bumped by every claim that takes jobs of a limited tenant: a claimer whose
  -- snapshot predates the bump knows its count of running jobs is stale.
  claim_seq         bigint      NOT NULL DEFAULT 0,
  window_started_at timestamptz,
  window_claims     integer     NOT NULL DEFAULT 0,
  updated_at        timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT tenants_rate_pair CHECK ((rate_count IS NULL) = (rate_per_seconds IS NULL))
);

-- Settings for tenants without their own. One row.
CREATE TABLE skiplock.tenant_defaults (
  singleton        boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  concurrency      integer CHECK (concurrency >= 0),
  rate_count       integer CHECK (rate_count >= 0),
  rate_per_seconds integer CHECK (rate_per_seconds >= 1),
  weight           integer NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000),
  CONSTRAINT tenant_defaults_rate_pair CHECK ((rate_count IS NULL) = (rate_per_seconds IS NULL))
);
INSERT INTO skiplock.tenant_defaults DEFAULT VALUES;

-- The limits in force for each tenant: its own settings, or the defaults.
CREATE VIEW skiplock.tenant_limits AS
SELECT t.name, t.has_settings AS custom, t.claim_seq,
       CASE WHEN t.has_settings THEN t.concurrency ELSE d.concurrency END AS concurrency,
       CASE WHEN t.has_settings THEN t.rate_count ELSE d.rate_count END AS rate_count,
       CASE WHEN t.has_settings THEN t.rate_per_seconds ELSE d.rate_per_seconds END AS rate_per_seconds,
       CASE WHEN t.has_settings THEN t.weight ELSE d.weight END AS weight
FROM skiplock.tenants t CROSS JOIN skiplock.tenant_defaults d;

-- Periodic jobs: next_run_at moves forward by compare-and-set, so two drains
-- that overlap enqueue each tick once.
CREATE TABLE skiplock.schedules (
  name        text        PRIMARY KEY,
  cron        text        NOT NULL,
  timezone    text        NOT NULL DEFAULT 'UTC',
  queue       text        NOT NULL,
  type        text        NOT NULL,
  tenant      text        NOT NULL DEFAULT 'default',
  payload     jsonb       NOT NULL DEFAULT 'null',
  options     jsonb       NOT NULL DEFAULT '{}',
  next_run_at timestamptz NOT NULL,
  last_run_at timestamptz,
  enabled     boolean     NOT NULL DEFAULT true,
  created_at  timestamptz NOT NULL DEFAULT now()
);

-- The status the API shows: waiting jobs are scheduled (run_at ahead),
-- retrying (waiting out a backoff) or queued (ready now).
CREATE FUNCTION skiplock.job_status(state text, run_at timestamptz) RETURNS text
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT CASE
    WHEN state IN ('scheduled', 'queued', 'retrying') AND run_at <= now() THEN 'queued'
    WHEN state IN ('scheduled', 'queued') THEN 'scheduled'
    ELSE state
  END
$$;

CREATE FUNCTION skiplock.iso(ts timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT to_char(ts AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
$$;

-- The one definition of a job as the engine and the API show it (camelCase,
-- ISO timestamps), so every statement that returns jobs returns the same shape
-- whichever driver reads it.
CREATE FUNCTION skiplock.job_json(j skiplock.jobs) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT jsonb_build_object(
    'id', j.id, 'queue', j.queue, 'type', j.type, 'tenant', j.tenant,
    'status', skiplock.job_status(j.state, j.run_at), 'priority', j.priority,
    'payload', j.payload, 'attempts', j.attempts, 'maxAttempts', j.max_attempts,
    'leaseSeconds', j.lease_seconds, 'runAt', skiplock.iso(j.run_at),
    'expiresAt', skiplock.iso(j.expires_at), 'dedupKey', j.dedup_key,
    'createdAt', skiplock.iso(j.created_at), 'firstStartedAt', skiplock.iso(j.first_started_at),
    'startedAt', skiplock.iso(j.started_at), 'finishedAt', skiplock.iso(j.finished_at),
    'durationMs', j.duration_ms, 'leaseExpiresAt', skiplock.iso(j.lease_expires_at),
    'workerId', j.worker_id, 'cancelRequested', j.cancel_requested_at IS NOT NULL,
    'progress', j.progress, 'result', j.result, 'lastError', j.last_error)
$$;
