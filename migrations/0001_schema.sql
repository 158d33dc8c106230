-- skiplock's schema.
--
-- Two tables hold the jobs. `skiplock.jobs` is the queue: jobs waiting or
-- running, narrow and with only the indexes that claiming, counting running
-- jobs and reaping need, so a claim stays cheap however long the history is.
-- When a job finishes, the statement that finishes it moves its row to
-- `skiplock.finished_jobs`, which is partitioned by day: retention drops whole
-- days, so the history never needs vacuuming. `skiplock.all_jobs` shows both.
--
-- A job's row says what happened on the way through (created, claimed,
-- started, finished, by which worker, after how many attempts);
-- `skiplock.job_events` records only what the row cannot: failed attempts,
-- lease expiries, hand-backs, heartbeats, cancellations, retries and
-- reschedules.

CREATE SCHEMA IF NOT EXISTS skiplock;

-- UUIDv7 (RFC 9562): unguessable (48 random bits) and in creation order, so
-- a job's id is also its place in the lists, newest first. The first 48 bits
-- are the Unix time in milliseconds and the next 12 the fraction of that
-- millisecond (RFC 9562's method 3), so ids of one connection sort in the
-- order they were made; `n` (14 bits, before the random ones) orders the ids
-- one statement makes at one instant, such as a batch enqueue's jobs.
-- Postgres 18's uuidv7() does the same from the one clock reading; this works
-- from 13 on. The random bits come from the system's secure generator, which
-- costs an enqueue more than the rest of making its id; a statement that
-- makes many ids draws one secret `seed` (a random uuid's bytes) instead,
-- and each id's bits are the start of sha256(seed || n): as unguessable, the
-- seed never leaving the statement.
CREATE FUNCTION skiplock.uuid_v7(at timestamptz, n integer DEFAULT 0, seed bytea DEFAULT NULL) RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
  SELECT encode(
    substring(int8send(floor(extract(epoch FROM at) * 1000)::bigint) FROM 3)
    || substring(int4send(28672 + (floor(extract(epoch FROM at) * 1000000)::bigint % 1000 * 4096 / 1000)::integer) FROM 3)
    || substring(int4send(32768 + (n & 16383)) FROM 3)
    || CASE WHEN seed IS NULL THEN substring(uuid_send(gen_random_uuid()) FROM 11)
            ELSE substring(sha256(seed || int4send(n)) FOR 6) END,
    'hex')::uuid
$$;

-- ---------------------------------------------------------------------------
-- The queue
-- ---------------------------------------------------------------------------

-- What a job's names and settings may be, as domains rather than checks on
-- the table: Postgres tests every check of a table on every UPDATE, each
-- read again from its stored text per statement, a fixed cost a claim of one
-- job felt almost as much as its row; a domain's checks are read once per
-- connection and tested only where a statement writes the column.
-- Names of queues, job types and tenants:
CREATE DOMAIN skiplock.short_name AS text
  CONSTRAINT short_name_length CHECK (length(VALUE) BETWEEN 1 AND 128);
CREATE DOMAIN skiplock.priority AS smallint
  CONSTRAINT priority_range CHECK (VALUE BETWEEN -1000 AND 1000);
CREATE DOMAIN skiplock.attempts_allowed AS smallint
  CONSTRAINT attempts_allowed_range CHECK (VALUE BETWEEN 1 AND 1000);
CREATE DOMAIN skiplock.attempt_count AS smallint
  CONSTRAINT attempt_count_range CHECK (VALUE >= 0);
CREATE DOMAIN skiplock.lease_length AS integer
  CONSTRAINT lease_length_range CHECK (VALUE BETWEEN 1 AND 86400);
CREATE DOMAIN skiplock.callback_url AS text
  CONSTRAINT callback_url_http CHECK (VALUE ~* '^https?://[^\s/?#]' AND length(VALUE) <= 2048);

CREATE TABLE skiplock.jobs (
  -- Also the enqueue order (see skiplock.uuid_v7).
  id                   uuid        PRIMARY KEY DEFAULT skiplock.uuid_v7(clock_timestamp()),
  queue                skiplock.short_name NOT NULL,
  type                 skiplock.short_name NOT NULL,
  tenant               skiplock.short_name NOT NULL DEFAULT 'default',
  -- Waiting (scheduled, queued, retrying) or running. The API shows a waiting
  -- job as scheduled, queued or retrying by its run_at (skiplock.job_status).
  state                text        NOT NULL DEFAULT 'queued',
  priority             skiplock.priority NOT NULL DEFAULT 0,
  run_at               timestamptz NOT NULL DEFAULT now(),
  attempts             skiplock.attempt_count NOT NULL DEFAULT 0,
  max_attempts         skiplock.attempts_allowed NOT NULL DEFAULT 5,
  -- The per-job timeout: how long one claim owns the job without a heartbeat.
  lease_seconds        skiplock.lease_length NOT NULL DEFAULT 60,
  backoff_base_seconds real        NOT NULL DEFAULT 1,
  backoff_max_seconds  real        NOT NULL DEFAULT 3600,
  expires_at           timestamptz,
  dedup_key            text,
  dedup_window_seconds integer     NOT NULL DEFAULT 0,
  created_at           timestamptz NOT NULL DEFAULT now(),
  first_started_at     timestamptz,
  -- The current (or last) attempt: when it started, and by whom. A claim
  -- sets it; the end of the attempt moves it to when the handler started
  -- (a worker may hold a claimed job until a slot frees).
  started_at           timestamptz,
  worker_id            text,
  -- Fencing token: a new one per claim, present exactly while the job runs;
  -- every change a worker makes must present it.
  lease_token          uuid,
  lease_expires_at     timestamptz,
  cancel_requested_at  timestamptz,
  payload              jsonb       NOT NULL DEFAULT 'null',
  progress             jsonb,
  -- The last failed attempt's error, kept while the job waits to retry.
  last_error           jsonb,
  -- Where the job's end is announced (see "Completion callbacks"): a success
  -- to callback_url, any other end to failure_callback_url.
  callback_url         skiplock.callback_url,
  failure_callback_url skiplock.callback_url,
  -- How long its handler ran, summed over the attempts ended so far.
  run_ms               bigint      NOT NULL DEFAULT 0,
  CONSTRAINT jobs_state_live CHECK (state IN ('scheduled', 'queued', 'retrying', 'running')),
  CONSTRAINT jobs_lease_while_running CHECK (
    (state = 'running') = (lease_token IS NOT NULL)
    AND (state <> 'running' OR lease_expires_at IS NOT NULL))
-- Room on each page for a claimed row's new version next to its old one.
) WITH (fillfactor = 80);

-- Claiming: per tenant and queue, in claim order (highest priority first,
-- as -priority, so every column ascends and a claim can start its scan at a
-- key with one row comparison). Covers only waiting rows.
CREATE INDEX jobs_waiting_idx ON skiplock.jobs (tenant, queue, (-priority), run_at, id)
  WHERE state IN ('scheduled', 'queued', 'retrying');
-- Running jobs: counted per tenant and per queue (limits, fairness); expired
-- leases (the reaper).
CREATE INDEX jobs_running_idx ON skiplock.jobs (tenant, queue, lease_expires_at) WHERE state = 'running';
-- Jobs that must expire before they ever start.
CREATE INDEX jobs_expiring_idx ON skiplock.jobs (expires_at)
  WHERE expires_at IS NOT NULL AND state IN ('scheduled', 'queued', 'retrying');

-- Which changes of state a live job may make; finishing moves the row to
-- finished_jobs instead. Waiting jobs only start; running ones end their
-- attempt by waiting again (a retry, a hand-back, a reaped lease).
-- plpgsql, which is never inlined: jobs_legal_transition's WHEN calls it,
-- and a SQL function there would be parsed and inlined again for every
-- statement that updates jobs, a fixed cost that weighs on a claim of one.
CREATE FUNCTION skiplock.is_legal_transition(from_state text, to_state text) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN
  RETURN (from_state, to_state) IN (
    ('scheduled', 'running'), ('queued', 'running'), ('retrying', 'running'),
    ('running', 'scheduled'), ('running', 'queued'), ('running', 'retrying'),
    ('scheduled', 'queued'), ('queued', 'scheduled'), ('retrying', 'queued'), ('retrying', 'scheduled'));
END
$$;

CREATE FUNCTION skiplock.refuse_illegal_transition() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'illegal job state transition: % -> %', OLD.state, NEW.state
    USING ERRCODE = 'check_violation', DETAIL = format('job %s', OLD.id), CONSTRAINT = TG_NAME;
END
$$;

-- Whoever issues the UPDATE. A constraint trigger, so the error names a
-- constraint that exists; its WHEN clause keeps legal updates from queueing
-- anything, and settles a claim (a live job can only start from waiting)
-- at its first test.
CREATE CONSTRAINT TRIGGER jobs_legal_transition
  AFTER UPDATE OF state ON skiplock.jobs
  FOR EACH ROW
  WHEN (NEW.state <> 'running' AND OLD.state IS DISTINCT FROM NEW.state
        AND NOT skiplock.is_legal_transition(OLD.state, NEW.state))
  EXECUTE FUNCTION skiplock.refuse_illegal_transition();

-- Changes that make a job waiting: a counter, and a lock that says one is
-- in flight. A claim's first probe walks the waiting index from its front,
-- over the entries of every job claimed since vacuum last removed them: many
-- on a deep queue, and while any transaction holds a snapshot each costs a
-- visit to its row. So a session that found the walk slow keeps where its
-- probe found the first waiting job (the claim hint, see claim_batch), and
-- its next claim starts there. That is safe while no job has become waiting
-- since: every change that makes one (an insert; an update that leaves a
-- job waiting: a retry, a hand-back, a reaped lease, a reschedule, an
-- application's own UPDATE) first takes this lock, shared, until it commits,
-- then counts itself. A claim keeps a hint only from a probe started after
-- it read the counter and saw the lock free, so every change it counted was
-- committed and seen, and it uses a hint only while the counter still reads
-- the same after its probe. A sequence, not a row: counting takes no row
-- lock and writes no row version, and its value is read at once by every
-- session, committed or not. Its cache must stay 1: a session's cached
-- values would count changes no other session sees.
CREATE SEQUENCE skiplock.waiting_changes CACHE 1;

CREATE FUNCTION skiplock.note_waiting_change() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  -- ('sklk', 1): claim_batch looks this lock up in pg_locks by these keys.
  PERFORM pg_advisory_xact_lock_shared(1936419947, 1);
  PERFORM nextval('skiplock.waiting_changes');
END
$$;

CREATE FUNCTION skiplock.on_job_waiting_again() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM skiplock.note_waiting_change();
  RETURN NEW;
END
$$;

-- Inserts count once per statement (skiplock.on_jobs_inserted). A claim,
-- which only starts jobs, is settled by the WHEN clause at its first test.
CREATE TRIGGER jobs_waiting_again
  BEFORE UPDATE ON skiplock.jobs
  FOR EACH ROW
  WHEN (NEW.state <> 'running')
  EXECUTE FUNCTION skiplock.on_job_waiting_again();

-- ---------------------------------------------------------------------------
-- The history
-- ---------------------------------------------------------------------------

-- Every column of jobs, in the same order, then the outcome. Partitioned by
-- the day the job finished (UTC); skiplock.maintain_finished_jobs() makes the
-- days ahead and drops those past the retention. The default partition
-- catches what finishes on a day not made yet, so no completion can fail.
CREATE TABLE skiplock.finished_jobs (
  id                   uuid        NOT NULL,
  queue                text        NOT NULL,
  type                 text        NOT NULL,
  tenant               text        NOT NULL,
  state                text        NOT NULL,
  priority             smallint    NOT NULL,
  run_at               timestamptz NOT NULL,
  attempts             smallint    NOT NULL,
  max_attempts         smallint    NOT NULL,
  lease_seconds        integer     NOT NULL,
  backoff_base_seconds real        NOT NULL,
  backoff_max_seconds  real        NOT NULL,
  expires_at           timestamptz,
  dedup_key            text,
  dedup_window_seconds integer     NOT NULL,
  created_at           timestamptz NOT NULL,
  first_started_at     timestamptz,
  started_at           timestamptz,
  worker_id            text,
  lease_token          uuid,
  lease_expires_at     timestamptz,
  cancel_requested_at  timestamptz,
  payload              jsonb       NOT NULL,
  progress             jsonb,
  last_error           jsonb,
  callback_url         text,
  failure_callback_url text,
  run_ms               bigint      NOT NULL DEFAULT 0,
  finished_at          timestamptz NOT NULL,
  result               jsonb,
  CONSTRAINT finished_jobs_state_final CHECK (state IN ('succeeded', 'failed', 'cancelled', 'expired'))
) PARTITION BY RANGE (finished_at);

CREATE TABLE skiplock.finished_jobs_default PARTITION OF skiplock.finished_jobs DEFAULT;

-- Lookups by id and lists newest first (ids are in creation order), and
-- time windows (throughput): rows arrive in finish order, so a BRIN index
-- serves those at almost no cost per row.
CREATE INDEX finished_jobs_id_idx ON skiplock.finished_jobs (id);
CREATE INDEX finished_jobs_finished_at_idx ON skiplock.finished_jobs USING brin (finished_at);

-- A finished job's outcome is final; only a retry, which moves it back to
-- the queue, runs it again.
CREATE FUNCTION skiplock.refuse_finished_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'illegal job state transition: % -> %', OLD.state, NEW.state
    USING ERRCODE = 'check_violation', DETAIL = format('job %s', OLD.id), HINT = 'retry the job instead',
          CONSTRAINT = 'finished_jobs_state_final';
END
$$;

CREATE TRIGGER finished_jobs_outcome_final
  BEFORE UPDATE OF state ON skiplock.finished_jobs
  FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state)
  EXECUTE FUNCTION skiplock.refuse_finished_change();

-- Makes the partitions of the next days and drops those whose whole day is
-- older than the retention; deletes what the default partition holds past
-- it. Partitions are DDL, so their names and bounds are written into the
-- statements (they are dates this function computes, never input). Each
-- change waits at most lock_timeout for its lock and is otherwise left for
-- the next call, so a long reader never stalls the completions queued
-- behind a waiting drop.
CREATE FUNCTION skiplock.maintain_finished_jobs(retention interval, days_ahead integer DEFAULT 2)
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
      EXECUTE format('DROP TABLE skiplock.%I', partition_name);
      dropped := dropped + 1;
    EXCEPTION WHEN lock_not_available THEN
      NULL;
    END;
  END LOOP;

  -- Rows of days that had no partition go one by one, in a bounded batch
  -- (the next round takes the rest): normally there are none.
  DELETE FROM skiplock.finished_jobs_default
  WHERE ctid = ANY(ARRAY(SELECT ctid FROM skiplock.finished_jobs_default
                         WHERE finished_at < prune_before LIMIT 10000));
  GET DIAGNOSTICS deleted = ROW_COUNT;
  RETURN NEXT;
END
$$;

-- ---------------------------------------------------------------------------
-- Jobs as the API shows them
-- ---------------------------------------------------------------------------

CREATE VIEW skiplock.all_jobs AS
SELECT j.*, NULL::timestamptz AS finished_at, NULL::jsonb AS result FROM skiplock.jobs j
UNION ALL
SELECT f.* FROM skiplock.finished_jobs f;

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

-- The job as the engine and the API show it (camelCase). row_to_json over a
-- named row type is several times cheaper than jsonb_build_object; its
-- timestamps come out as Postgres writes them in JSON, and the engine gives
-- them the API's form (UTC, milliseconds, Z).
CREATE TYPE skiplock.job_shape AS (
  id                 uuid,
  queue              text,
  type               text,
  tenant             text,
  status             text,
  priority           integer,
  payload            jsonb,
  attempts           integer,
  "maxAttempts"      integer,
  "leaseSeconds"     integer,
  "runAt"            timestamptz,
  "expiresAt"        timestamptz,
  "dedupKey"         text,
  "createdAt"        timestamptz,
  "firstStartedAt"   timestamptz,
  "startedAt"        timestamptz,
  "finishedAt"       timestamptz,
  "durationMs"       bigint,
  "leaseExpiresAt"   timestamptz,
  "workerId"         text,
  "cancelRequested"  boolean,
  progress           jsonb,
  result             jsonb,
  "lastError"        jsonb,
  "callbackUrl"      text,
  "failureCallbackUrl" text,
  "runMs"            bigint
);

-- One expression, so the planner inlines it into each statement.
CREATE FUNCTION skiplock.job_json(j skiplock.all_jobs) RETURNS json
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT row_to_json(ROW(
    j.id, j.queue, j.type, j.tenant, skiplock.job_status(j.state, j.run_at), j.priority,
    j.payload, j.attempts, j.max_attempts, j.lease_seconds, j.run_at, j.expires_at, j.dedup_key,
    j.created_at, j.first_started_at, j.started_at, j.finished_at,
    (extract(epoch FROM j.finished_at - j.started_at) * 1000)::bigint,
    j.lease_expires_at, j.worker_id, j.cancel_requested_at IS NOT NULL,
    j.progress, j.result, j.last_error, j.callback_url, j.failure_callback_url, j.run_ms)::skiplock.job_shape)
$$;

-- The same for a row of either table.
CREATE FUNCTION skiplock.job_json(j skiplock.jobs) RETURNS json
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT skiplock.job_json(ROW(j.*, NULL, NULL)::skiplock.all_jobs)
$$;

CREATE FUNCTION skiplock.job_json(f skiplock.finished_jobs) RETURNS json
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT skiplock.job_json(ROW(f.*)::skiplock.all_jobs)
$$;

-- When the handler of an attempt started: its claim, plus how long its
-- worker held the job before starting it (claimed ahead, waiting for a free
-- slot), as the worker measured it; never later than now.
CREATE FUNCTION skiplock.handler_started_at(claimed_at timestamptz, held_ms double precision) RETURNS timestamptz
LANGUAGE sql VOLATILE AS $$
  SELECT least(claimed_at + make_interval(secs => held_ms / 1000), clock_timestamp())
$$;

-- Milliseconds from one time to another.
CREATE FUNCTION skiplock.ms_between(from_time timestamptz, to_time timestamptz) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT (extract(epoch FROM to_time - from_time) * 1000)::bigint
$$;

-- How a live job becomes a finished one: the definition every statement
-- that finishes jobs inserts (fail, cancel, expire, reap; the completion,
-- the hot path, writes it out column by column, see complete_jobs). The
-- lease ends with the run. held_ms is given when the job's worker ends its
-- attempt (see handler_started_at): the attempt's start moves to its
-- handler's, and its run time is added to the job's. An expression the
-- planner inlines. Each statement makes it once, in its DELETE's RETURNING,
-- and takes that row apart: (as_finished(...)).* would inline it once per
-- column whenever the statement is planned, which took planning many times
-- longer than running the statement.
CREATE FUNCTION skiplock.as_finished(
  j skiplock.jobs, outcome text, outcome_result jsonb, error jsonb, held_ms double precision DEFAULT NULL)
RETURNS skiplock.finished_jobs
LANGUAGE sql VOLATILE AS $$
  SELECT ROW(
    j.id, j.queue, j.type, j.tenant, outcome, j.priority, j.run_at, j.attempts, j.max_attempts,
    j.lease_seconds, j.backoff_base_seconds, j.backoff_max_seconds, j.expires_at, j.dedup_key,
    j.dedup_window_seconds, j.created_at, j.first_started_at,
    CASE WHEN held_ms IS NULL THEN j.started_at ELSE skiplock.handler_started_at(j.started_at, held_ms) END,
    j.worker_id, NULL, NULL, j.cancel_requested_at, j.payload, j.progress, coalesce(error, j.last_error),
    j.callback_url, j.failure_callback_url,
    j.run_ms + CASE WHEN held_ms IS NULL THEN 0
                    ELSE skiplock.ms_between(skiplock.handler_started_at(j.started_at, held_ms), clock_timestamp()) END,
    clock_timestamp(), outcome_result)::skiplock.finished_jobs
$$;

-- ---------------------------------------------------------------------------
-- Deduplication
-- ---------------------------------------------------------------------------

-- The dedup keys in force, per tenant and queue: a live job's key, and a
-- finished job's for its dedup window. A table of its own, with a unique
-- key, so concurrent enqueues cannot both win, and so a key outlives its
-- job's move to the history.
CREATE TABLE skiplock.dedup_keys (
  tenant     text        NOT NULL,
  queue      text        NOT NULL,
  dedup_key  text        NOT NULL,
  job_id     uuid        NOT NULL,
  -- Null while the job is live; once it finished, when its key stops matching.
  expires_at timestamptz,
  PRIMARY KEY (tenant, queue, dedup_key)
);
CREATE INDEX dedup_keys_expiring_idx ON skiplock.dedup_keys (expires_at) WHERE expires_at IS NOT NULL;

-- A job that finishes frees its key, or keeps it for its dedup window.
-- Whoever moves the job to the history; only rows with a key run it.
CREATE FUNCTION skiplock.on_keyed_job_finished() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.dedup_window_seconds > 0 THEN
    UPDATE skiplock.dedup_keys
    SET expires_at = NEW.finished_at + make_interval(secs => NEW.dedup_window_seconds)
    WHERE (tenant, queue, dedup_key) = (NEW.tenant, NEW.queue, NEW.dedup_key) AND job_id = NEW.id;
  ELSE
    DELETE FROM skiplock.dedup_keys
    WHERE (tenant, queue, dedup_key) = (NEW.tenant, NEW.queue, NEW.dedup_key) AND job_id = NEW.id;
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER finished_jobs_release_dedup_key
  AFTER INSERT ON skiplock.finished_jobs
  FOR EACH ROW WHEN (NEW.dedup_key IS NOT NULL)
  EXECUTE FUNCTION skiplock.on_keyed_job_finished();

-- ---------------------------------------------------------------------------
-- Events: what a job's row cannot say
-- ---------------------------------------------------------------------------

-- Append-only. No foreign key, so appending stays one cheap insert.
CREATE TABLE skiplock.job_events (
  id        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  job_id    uuid        NOT NULL,
  -- The wall clock when the row is written, not the transaction's start: a
  -- statement's start can precede the commit it waited to see.
  at        timestamptz NOT NULL DEFAULT clock_timestamp(),
  kind      text        NOT NULL,
  attempt   integer     NOT NULL,
  worker_id text,
  detail    jsonb,
  CONSTRAINT job_events_kind_known CHECK (kind IN
    ('lease_extended', 'failed', 'retried', 'released', 'cancel_requested', 'cancelled', 'expired',
     'lease_expired', 'rescheduled', 'callback_enqueued'))
);
CREATE INDEX job_events_job_idx ON skiplock.job_events (job_id, id);
CREATE INDEX job_events_at_idx ON skiplock.job_events USING brin (at);

CREATE FUNCTION skiplock.refuse_event_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'skiplock.job_events is append-only' USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER job_events_append_only
  BEFORE UPDATE ON skiplock.job_events
  FOR EACH ROW EXECUTE FUNCTION skiplock.refuse_event_change();

-- ---------------------------------------------------------------------------
-- Completion callbacks
-- ---------------------------------------------------------------------------

-- A job that ends with a callback URL for its outcome (callback_url for a
-- success, failure_callback_url for a failure, cancellation or expiry)
-- enqueues its announcement in the statement that ends it: a job of the
-- built-in `http` type, in queue skiplock.callbacks, of the same tenant (its
-- allow-list entries apply, and its fairness share pays) and priority, that
-- POSTs a Standard Webhooks event signed like every http delivery:
--
--   {"type": "job.succeeded", "timestamp": "<finishedAt>",
--    "data": {"id", "queue", "type", "tenant", "status", "attempts", "maxAttempts", "createdAt",
--             "startedAt", "finishedAt", "durationMs", "result", "lastError"}}
--
-- The payload is left out: the receiver sent it, and it may be large. The
-- delivery retries with backoff for about an hour and a half (10 attempts,
-- 10 s doubling up to an hour, full jitter); `callback_enqueued` in the job's
-- history names the delivery job, whose attempts the history shows too.
CREATE FUNCTION skiplock.on_job_finished_with_callback() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  url text := CASE WHEN NEW.state = 'succeeded' THEN NEW.callback_url ELSE NEW.failure_callback_url END;
  event text := 'job.' || NEW.state;
  delivery uuid;
BEGIN
  IF url IS NULL THEN
    RETURN NULL;
  END IF;
  INSERT INTO skiplock.jobs AS j (queue, type, tenant, priority, max_attempts, backoff_base_seconds, payload)
  VALUES ('skiplock.callbacks', 'http', NEW.tenant, NEW.priority, 10, 10, jsonb_build_object(
    'url', url,
    'method', 'POST',
    'body', jsonb_build_object(
      'type', event,
      'timestamp', skiplock.iso(NEW.finished_at),
      'data', jsonb_build_object(
        'id', NEW.id, 'queue', NEW.queue, 'type', NEW.type, 'tenant', NEW.tenant, 'status', NEW.state,
        'attempts', NEW.attempts, 'maxAttempts', NEW.max_attempts, 'createdAt', skiplock.iso(NEW.created_at),
        'startedAt', skiplock.iso(NEW.started_at), 'finishedAt', skiplock.iso(NEW.finished_at),
        'durationMs', (extract(epoch FROM NEW.finished_at - NEW.started_at) * 1000)::bigint,
        'result', NEW.result, 'lastError', NEW.last_error))))
  RETURNING j.id INTO delivery;
  INSERT INTO skiplock.job_events (job_id, kind, attempt, worker_id, detail)
  VALUES (NEW.id, 'callback_enqueued', NEW.attempts, NEW.worker_id,
          jsonb_build_object('callbackJobId', delivery, 'url', url, 'event', event));
  RETURN NULL;
END
$$;

-- Only rows with a callback URL run it: for the rest, completion pays a null test.
CREATE TRIGGER finished_jobs_announce
  AFTER INSERT ON skiplock.finished_jobs
  FOR EACH ROW WHEN (NEW.callback_url IS NOT NULL OR NEW.failure_callback_url IS NOT NULL)
  EXECUTE FUNCTION skiplock.on_job_finished_with_callback();

-- ---------------------------------------------------------------------------
-- Attempt statistics
-- ---------------------------------------------------------------------------

-- Every attempt that ended between two times, with how long it waited for
-- its handler to start (from when it was due: enqueued, its run_at, or its
-- retry time) and how long its handler ran. A success is its job's row in
-- the history (its last attempt); every other ending is an event that says
-- both (skiplock.fail_jobs, cancellation of a running job). Attempts cut off
-- by a lapsed lease have no run time and are not counted. One SELECT the
-- planner inlines, so the callers' time bounds reach the BRIN indexes.
CREATE FUNCTION skiplock.ended_attempts(since timestamptz, until timestamptz)
RETURNS TABLE (ended_at timestamptz, queue text, tenant text, succeeded boolean, wait_ms bigint, run_ms bigint)
LANGUAGE sql STABLE AS $$
  SELECT f.finished_at, f.queue, f.tenant, true,
         greatest(0, skiplock.ms_between(f.run_at, f.started_at)),
         skiplock.ms_between(f.started_at, f.finished_at)
  FROM skiplock.finished_jobs f
  WHERE f.finished_at >= since AND f.finished_at < until AND f.state = 'succeeded'
  UNION ALL
  SELECT e.at, a.queue, a.tenant, false, (e.detail->>'waitMs')::bigint, (e.detail->>'runMs')::bigint
  FROM skiplock.job_events e
  JOIN skiplock.all_jobs a ON a.id = e.job_id
  WHERE e.at >= since AND e.at < until AND e.kind IN ('failed', 'cancelled') AND e.detail ? 'runMs'
$$;

-- Durations kept as log-scale histograms, so days can be summed and their
-- percentiles still read: a jsonb object from bucket number to count, with
-- only the buckets that have counts. Bucket 0 holds 0 ms; bucket b >= 1
-- holds [2^((b-1)/4), 2^(b/4)) ms, four to a doubling, up to about 35 days
-- in the last (127). A percentile read back is its bucket's geometric
-- middle: within 9% of the exact figure.
CREATE FUNCTION skiplock.histogram_bucket(ms bigint) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN ms < 1 THEN 0 ELSE least(127, 1 + floor(4 * log(2, ms::numeric))::integer) END
$$;

CREATE FUNCTION skiplock.histogram_add(a jsonb, b jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(jsonb_object_agg(bucket, total ORDER BY bucket::integer), '{}')
  FROM (SELECT bucket, sum(n::bigint) AS total
        FROM (SELECT * FROM jsonb_each_text(coalesce(a, '{}')) UNION ALL SELECT * FROM jsonb_each_text(coalesce(b, '{}'))) AS t (bucket, n)
        GROUP BY bucket) AS sums
$$;

CREATE AGGREGATE skiplock.histogram_sum(jsonb) (SFUNC = skiplock.histogram_add, STYPE = jsonb, INITCOND = '{}');

-- The smallest bucket holding at least the fraction q of the counts (as
-- percentile_disc picks a value), read back as its geometric middle.
CREATE FUNCTION skiplock.histogram_percentile(h jsonb, q double precision) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN bucket = 0 THEN 0 ELSE round(2 ^ ((bucket - 0.5) / 4))::bigint END
  FROM (SELECT bucket, sum(n) OVER (ORDER BY bucket) AS below, sum(n) OVER () AS total
        FROM (SELECT key::integer, value::bigint FROM jsonb_each_text(h)) AS b (bucket, n)) AS c
  WHERE below >= q * total
  ORDER BY bucket
  LIMIT 1
$$;

-- Per day (UTC), queue and tenant, the attempts that ended between two
-- times: counts and the histograms of their waits and runs.
CREATE FUNCTION skiplock.attempt_stats(since timestamptz, until timestamptz)
RETURNS TABLE (day date, queue text, tenant text, attempts bigint, succeeded bigint, failed bigint,
               wait_ms_histogram jsonb, run_ms_histogram jsonb)
LANGUAGE sql STABLE AS $$
  WITH attempt AS (
    SELECT (a.ended_at AT TIME ZONE 'UTC')::date AS day, a.queue, a.tenant, a.succeeded, a.wait_ms, a.run_ms
    FROM skiplock.ended_attempts(since, until) a
  ),
  per_bucket AS (
    SELECT day, queue, tenant, 'wait' AS measure, skiplock.histogram_bucket(wait_ms) AS bucket, count(*) AS n
    FROM attempt WHERE wait_ms IS NOT NULL GROUP BY 1, 2, 3, 4, 5
    UNION ALL
    SELECT day, queue, tenant, 'run', skiplock.histogram_bucket(run_ms), count(*)
    FROM attempt WHERE run_ms IS NOT NULL GROUP BY 1, 2, 3, 4, 5
  ),
  histograms AS (
    SELECT day, queue, tenant,
           coalesce(jsonb_object_agg(bucket, n ORDER BY bucket) FILTER (WHERE measure = 'wait'), '{}') AS wait_ms_histogram,
           coalesce(jsonb_object_agg(bucket, n ORDER BY bucket) FILTER (WHERE measure = 'run'), '{}') AS run_ms_histogram
    FROM per_bucket GROUP BY day, queue, tenant
  )
  SELECT day, queue, tenant, count(*), count(*) FILTER (WHERE succeeded), count(*) FILTER (WHERE NOT succeeded),
         h.wait_ms_histogram, h.run_ms_histogram
  FROM attempt JOIN histograms h USING (day, queue, tenant)
  GROUP BY day, queue, tenant, h.wait_ms_histogram, h.run_ms_histogram
$$;

-- The rollup: attempt statistics per day, queue and tenant, kept for their
-- own retention (longer than the history's), so the figures outlive the
-- jobs they were made from.
CREATE TABLE skiplock.daily_attempt_stats (
  day               date   NOT NULL,
  queue             text   NOT NULL,
  tenant            text   NOT NULL,
  attempts          bigint NOT NULL,
  succeeded         bigint NOT NULL,
  failed            bigint NOT NULL,
  wait_ms_histogram jsonb  NOT NULL,
  run_ms_histogram  jsonb  NOT NULL,
  PRIMARY KEY (day, queue, tenant)
);

-- How far the rollup has read: every attempt that ended before
-- rolled_through is in skiplock.daily_attempt_stats, none after. The
-- history's pruning never passes it, so no attempt is pruned unsummed.
CREATE TABLE skiplock.attempt_stats_rollup (
  only_row       boolean     PRIMARY KEY DEFAULT true CHECK (only_row),
  rolled_through timestamptz NOT NULL
);
INSERT INTO skiplock.attempt_stats_rollup (rolled_through) VALUES (date_trunc('hour', now(), 'UTC'));

-- Adds the whole hours ended since the last rollup (at most max_span of
-- them a call) to the daily rows, and drops the days past keep. An hour is
-- read five minutes after it ends, so a statement that ended a job just
-- before the hour and committed just after it is not missed. Housekeeping
-- calls it every round: until an hour is due it only reads the one row.
-- One caller at a time; another finds the row locked and returns at once.
CREATE FUNCTION skiplock.roll_up_attempt_stats(keep interval, max_span interval DEFAULT interval '7 days')
RETURNS TABLE (rolled_through timestamptz, rows_written integer, rows_dropped integer)
LANGUAGE plpgsql AS $$
DECLARE
  due timestamptz := date_trunc('hour', now() - interval '5 minutes', 'UTC');
  since timestamptz;
  upto timestamptz;
BEGIN
  rows_written := 0; rows_dropped := 0;
  SELECT r.rolled_through INTO since FROM skiplock.attempt_stats_rollup r;
  IF since >= due THEN
    rolled_through := since;
    RETURN NEXT;
    RETURN;
  END IF;
  SELECT r.rolled_through INTO since FROM skiplock.attempt_stats_rollup r FOR UPDATE SKIP LOCKED;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  upto := least(due, since + max_span);
  IF upto > since THEN
    INSERT INTO skiplock.daily_attempt_stats AS d
    SELECT * FROM skiplock.attempt_stats(since, upto)
    ON CONFLICT (day, queue, tenant) DO UPDATE SET
      attempts = d.attempts + excluded.attempts,
      succeeded = d.succeeded + excluded.succeeded,
      failed = d.failed + excluded.failed,
      wait_ms_histogram = skiplock.histogram_add(d.wait_ms_histogram, excluded.wait_ms_histogram),
      run_ms_histogram = skiplock.histogram_add(d.run_ms_histogram, excluded.run_ms_histogram);
    GET DIAGNOSTICS rows_written = ROW_COUNT;
    UPDATE skiplock.attempt_stats_rollup SET rolled_through = upto;
    since := upto;
    DELETE FROM skiplock.daily_attempt_stats WHERE day < ((now() - keep) AT TIME ZONE 'UTC')::date;
    GET DIAGNOSTICS rows_dropped = ROW_COUNT;
  END IF;
  rolled_through := since;
  RETURN NEXT;
END
$$;

SELECT skiplock.maintain_finished_jobs(interval '7 days');

-- ---------------------------------------------------------------------------
-- Tenants and queues
-- ---------------------------------------------------------------------------

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

-- Queue settings, for the queues someone gave any (a queue needs no row to
-- be used): weight shares each tenant's turns among its queues, as a
-- tenant's weight shares turns among tenants; concurrency caps the queue's
-- running jobs over all tenants together.
CREATE TABLE skiplock.queues (
  name        text        PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 128),
  concurrency integer     CHECK (concurrency >= 0),
  weight      integer     NOT NULL DEFAULT 1 CHECK (weight BETWEEN 1 AND 1000),
  -- Bumped by every claim that takes jobs of a capped queue, as tenants.claim_seq.
  claim_seq   bigint      NOT NULL DEFAULT 0,
  -- Where the queue's jobs go, whatever their type, instead of to handlers:
  -- {"target": "webhook", "url", ...} or {"target": "cloudflare-queue",
  -- "binding", ...} (the HTTP API's QueueDelivery). Only a drain that can
  -- deliver to that target claims them (claim_batch's delivery_targets).
  delivery    jsonb       CHECK (jsonb_typeof(delivery) = 'object'
                                 AND delivery->>'target' IN ('webhook', 'cloudflare-queue')),
  updated_at  timestamptz NOT NULL DEFAULT now()
);

-- Autovacuum never analyzes a table as small as tenant_defaults, and without
-- statistics the planner takes each of these for a thousand rows, which
-- tips every claim towards planning afresh instead of its kept plan.
ANALYZE skiplock.tenant_defaults;
ANALYZE skiplock.tenants;
ANALYZE skiplock.queues;

-- ---------------------------------------------------------------------------
-- Claiming
-- ---------------------------------------------------------------------------

-- A claimed job as a worker receives it: what the job row holds, in
-- columns (each driver reads these for a fraction of what building JSON
-- costs), camelCase so a row needs no mapping, timestamps in JSON's form
-- (ISO 8601, whatever the session's DateStyle). What every claimed job
-- shares (status running, the claiming worker) the caller knows.
CREATE TYPE skiplock.claimed_job AS (
  id                 uuid,
  queue              text,
  type               text,
  tenant             text,
  priority           integer,
  payload            jsonb,
  attempts           integer,
  "maxAttempts"      integer,
  "leaseSeconds"     integer,
  "leaseToken"       uuid,
  "leaseExpiresAt"   json,
  "runAt"            json,
  "expiresAt"        json,
  "dedupKey"         text,
  "createdAt"        json,
  "firstStartedAt"   json,
  "startedAt"        json,
  progress           jsonb,
  "lastError"        jsonb,
  "callbackUrl"      text,
  "failureCallbackUrl" text,
  -- Not bigint, which drivers read as text.
  "runMs"            double precision,
  -- The queue's delivery target at the claim (skiplock.queues.delivery), if any.
  delivery           jsonb,
  -- The job's place in the claim's order (1 first): rows come back in no
  -- promised order, since ordering them would copy every row once more.
  "position"         integer
);

-- Claims up to max_jobs ready jobs, fairly across tenants and, within each
-- tenant, across its queues, keeping every tenant's limits and every queue's
-- cap; each job with the fencing token its worker must present.
--
-- A function, so its plans are made once per connection and kept, whichever
-- driver calls it (planning costs more than running a small claim, and
-- Postgres would keep planning a prepared statement afresh when its
-- estimates favour it). Its statements are written to read the indexes in
-- order, and the settings below keep them so whatever the statistics say:
-- on a table not analyzed yet the planner takes the backlog for a few dozen
-- rows and would sort all of it (seconds on a deep queue) to find the first
-- job. jit is off: on a deep backlog the planner judges the statements
-- expensive enough to compile, which takes seconds too.
--
-- lease_seconds: null for each job's own; job_types, queues: null for all;
-- only_tenant: null for all (a tenant-bound pull worker gives its own);
-- delivery_targets: the delivery targets the claimer can deliver to. A queue
-- with a delivery target (skiplock.queues.delivery) gives its jobs, of any
-- type, only to a claimer naming that target, and to no other, so a job
-- meant for a webhook never reaches a handler or a pull worker.
CREATE FUNCTION skiplock.claim_batch(
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

  SELECT q.concurrency, q.delivery INTO first_cap, first_delivery FROM skiplock.queues q WHERE q.name = first_queue;

  -- One queue of one tenant waiting, neither limited: nothing to share or
  -- count, so a plain SKIP LOCKED claim of its first jobs in claim order.
  IF NOT coalesce(more_waiting, false)
     AND first_cap IS NULL
     AND NOT EXISTS (SELECT 1 FROM skiplock.tenant_limits t
                     WHERE t.name = first_tenant AND (t.concurrency IS NOT NULL OR t.rate_count IS NOT NULL))
  THEN
    IF (queues IS NOT NULL AND NOT first_queue = ANY(queues))
       OR (first_delivery IS NOT NULL AND NOT coalesce(first_delivery->>'target' = ANY(delivery_targets), false))
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
      WHERE q.concurrency IS NOT NULL
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
        AND (q.concurrency IS NULL OR c.claim_seq = c.seen_seq)
        AND (q.delivery IS NULL OR q.delivery->>'target' = ANY(delivery_targets))
        AND EXISTS (
          SELECT 1 FROM skiplock.jobs j
          WHERE (j.tenant, j.queue, -j.priority, j.run_at, j.id) >= (w.tenant, w.queue, w.rank, w.run_at, w.id)
            AND (j.tenant, j.queue) <= (w.tenant, w.queue) AND j.state IN ('scheduled', 'queued', 'retrying')
            AND j.run_at <= now() AND (j.expires_at IS NULL OR j.expires_at > now())
            AND (q.delivery IS NOT NULL OR job_types IS NULL OR j.type = ANY(job_types)))
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
      -- index.
      SELECT l.ctid, chosen.id, chosen.tenant, chosen.queue, chosen.position FROM chosen CROSS JOIN LATERAL (
        SELECT j.ctid FROM skiplock.jobs j
        WHERE j.id = chosen.id AND j.state IN ('scheduled', 'queued', 'retrying')
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

-- Plans the claim on this connection without claiming anything. A claim
-- plans each of its statements the first time it runs them on a connection,
-- and one that finds a job runs several that an empty one does not: a
-- connection's first claim to find a job took milliseconds longer than the
-- rest, and an idle worker's pickup waited for it. So this claims a job of
-- its own, of a tenant no job has, in a block that is then undone: the job
-- and everything the claim changed roll back, its plans stay.
CREATE FUNCTION skiplock.prepare_claims() RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  BEGIN
    INSERT INTO skiplock.jobs (queue, type, tenant) VALUES ('skiplock.prepare', 'skiplock.prepare', 'skiplock.prepare');
    PERFORM FROM skiplock.claim_batch(1, NULL, NULL, NULL, 'skiplock.prepare', 'skiplock.prepare');
    RAISE SQLSTATE 'SKPRE';
  EXCEPTION WHEN SQLSTATE 'SKPRE' THEN
    NULL;
  END;
END
$$;

-- Completes jobs, each while its lease token still owns it: the job leaves
-- the queue for the history in this one statement. A function for the same
-- reason as claim_batch: its plan is made once per connection. As a
-- prepared statement Postgres kept planning it afresh, and planning reads
-- the ends of the jobs table's id index, where a drain leaves the entries of
-- the jobs it just finished until vacuum removes them: on a deep queue that
-- took many times longer than the completion itself. The completions come
-- as arrays, element n of each for the n-th job (a job's fields as JSON took
-- longer to read than the job to move): its id, its lease token, and how long
-- a worker that held the job before starting its handler held it (null for
-- none), which dates the attempt's start (handler_started_at); results is a
-- JSON array of the handlers' results, or null when none returned one.
-- Returns the jobs it completed, each with the token that completed it; a
-- completion it does not return found its token stale and changed nothing.
-- It finds each job by its key whatever the statistics said when the
-- connection made its plan: planned on an empty queue, it would otherwise
-- keep scanning the whole table for its jobs once the queue has grown.
CREATE FUNCTION skiplock.complete_jobs(
  ids uuid[], lease_tokens uuid[], held_ms double precision[], results jsonb, with_jobs boolean)
RETURNS TABLE (id uuid, "leaseToken" uuid, job json)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_nestloop = off
SET enable_mergejoin = off
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH input AS (
    SELECT c.id, c.lease_token, nullif(results -> (c.n - 1)::integer, 'null') AS result, c.held_ms
    FROM unnest(ids, lease_tokens, held_ms) WITH ORDINALITY AS c(id, lease_token, held_ms, n)
  ),
  done AS (
    DELETE FROM skiplock.jobs j
    USING input
    -- Each row by its key. A token matches only while its job runs
    -- (jobs_lease_while_running), so no condition on state.
    WHERE j.id = ANY (ids) AND j.id = input.id AND j.lease_token = input.lease_token
    -- skiplock.as_finished(j, 'succeeded', input.result, NULL, held_ms),
    -- column by column: a composite built here and taken apart by the
    -- INSERT cost the completion more than the history's insert itself.
    -- A test (test/engine/engine.test.ts) keeps the two alike.
    -- The id and token first: the statement's answer reads only those.
    RETURNING j.id, input.lease_token AS completed_by,
              j.queue, j.type, j.tenant, 'succeeded'::text AS state, j.priority, j.run_at, j.attempts,
              j.max_attempts, j.lease_seconds, j.backoff_base_seconds, j.backoff_max_seconds, j.expires_at,
              j.dedup_key, j.dedup_window_seconds, j.created_at, j.first_started_at,
              skiplock.handler_started_at(j.started_at, coalesce(input.held_ms, 0)) AS started_at,
              j.worker_id, NULL::uuid AS lease_token, NULL::timestamptz AS lease_expires_at, j.cancel_requested_at,
              j.payload, j.progress, j.last_error, j.callback_url, j.failure_callback_url,
              j.run_ms + skiplock.ms_between(skiplock.handler_started_at(j.started_at, coalesce(input.held_ms, 0)),
                                             clock_timestamp()) AS run_ms,
              clock_timestamp() AS finished_at, input.result
  ),
  finished AS (
    INSERT INTO skiplock.finished_jobs
    SELECT done.id, done.queue, done.type, done.tenant, done.state, done.priority, done.run_at, done.attempts,
           done.max_attempts, done.lease_seconds, done.backoff_base_seconds, done.backoff_max_seconds,
           done.expires_at, done.dedup_key, done.dedup_window_seconds, done.created_at, done.first_started_at,
           done.started_at, done.worker_id, done.lease_token, done.lease_expires_at, done.cancel_requested_at,
           done.payload, done.progress, done.last_error, done.callback_url, done.failure_callback_url,
           done.run_ms, done.finished_at, done.result
    FROM done
    -- Only when asked (a single completion): building the job costs as much as moving it.
    RETURNING finished_jobs.id, CASE WHEN with_jobs THEN skiplock.job_json(finished_jobs) END AS job
  )
  SELECT done.id, done.completed_by,
         CASE WHEN with_jobs THEN (SELECT finished.job FROM finished WHERE finished.id = done.id) END
  FROM done;
END
$$;

-- The claim's plan rests on the statistics of skiplock.jobs, and a queue
-- table changes wholesale faster than autovacuum looks. Without them, on a
-- fresh table of 100,000 waiting jobs, the planner sorts every waiting job
-- on each claim instead of reading the waiting index in order. Housekeeping
-- calls this: it analyzes the table when it was never analyzed yet holds
-- more than a few pages, or has seen ten times more changes than it held
-- rows at its last analysis (it grew past what its statistics describe; a
-- busy queue's steady churn is left to autovacuum, since an analysis in the
-- middle of a burst costs the burst more than the plans it would keep); it
-- skips the table while another analysis runs, and where the role may not
-- analyze it (not the owner).
CREATE FUNCTION skiplock.refresh_statistics() RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  stale boolean;
BEGIN
  SELECT ((c.reltuples < 0 AND pg_relation_size(c.oid) > 16 * current_setting('block_size')::bigint)
          OR s.n_mod_since_analyze > greatest(1000, 10 * c.reltuples))
         AND pg_has_role(c.relowner, 'USAGE')
    INTO stale
    FROM pg_stat_user_tables s
    JOIN pg_class c ON c.oid = s.relid
   WHERE s.relid = 'skiplock.jobs'::regclass;
  IF stale THEN
    ANALYZE (SKIP_LOCKED) skiplock.jobs;
  END IF;
  RETURN coalesce(stale, false);
END
$$;

-- ---------------------------------------------------------------------------
-- Enqueueing
-- ---------------------------------------------------------------------------

-- Whether a connection that LISTENs for enqueues is open on this database:
-- one that names itself skiplock_listener (application_name), as a Node
-- worker's does. A transaction that notifies holds a database-wide lock
-- from its commit until the commit is flushed, so notifying enqueues commit
-- one at a time; where nobody listens (a Worker drains from cron and
-- fan-out, and cannot LISTEN) the notification would only cost that. The
-- answer is kept in the session for a second, as reading the backends'
-- activity (pg_stat_get_activity) costs more than the enqueue's insert. A
-- listener that connects meanwhile loses nothing: it claims once when it
-- starts listening, and polls.
CREATE FUNCTION skiplock.anyone_listening() RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  -- 't' or 'f', a space, and when it was seen (epoch seconds).
  seen text := current_setting('skiplock.listening', true);
  listening boolean;
BEGIN
  IF seen LIKE '_ %' AND substr(seen, 3)::float8 > extract(epoch FROM now()) - 1 THEN
    RETURN left(seen, 1) = 't';
  END IF;
  listening := EXISTS (SELECT 1 FROM pg_stat_get_activity(NULL) a
                       WHERE a.datid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
                         AND a.application_name = 'skiplock_listener');
  PERFORM set_config('skiplock.listening', CASE WHEN listening THEN 't ' ELSE 'f ' END || extract(epoch FROM now()), false);
  RETURN listening;
END
$$;

-- Runs once for every statement that inserts jobs, whoever issues it
-- (the engine's enqueue, skiplock.enqueue, a schedule's tick, a retry, or an application's
-- own INSERT INTO skiplock.jobs), over the rows it inserted, so a plain
-- insert enqueues as the engine does:
-- - it counts a change that makes jobs waiting (skiplock.note_waiting_change),
--   so no claim starts its probe past them;
-- - it makes the tenant rows the claim needs (a job of a tenant without one
--   would never be claimed);
-- - a job inserted with a dedup key holds it, taking it when free or lapsed
--   as an enqueue would; a key that another job holds refuses the insert
--   (skiplock.enqueue would have returned that job instead). Jobs the
--   engine's enqueue inserted hold theirs already and change nothing here;
-- - a job can only be inserted waiting: a claim starts it;
-- - it wakes workers that LISTEN: one NOTIFY on channel skiplock_jobs, once
--   per statement, not per row (Postgres folds a transaction's identical
--   notifications into one), and only while a listener is connected (see
--   skiplock.anyone_listening). Jobs that become ready later (delays,
--   retries, hand-backs) are found by polling.
CREATE FUNCTION skiplock.on_jobs_inserted() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  any_running boolean;
  any_keyed boolean;
  taken record;
BEGIN
  PERFORM skiplock.note_waiting_change();

  INSERT INTO skiplock.tenants (name)
  SELECT DISTINCT i.tenant FROM inserted i
  ON CONFLICT (name) DO NOTHING;

  SELECT bool_or(i.state = 'running'), bool_or(i.dedup_key IS NOT NULL)
  INTO any_running, any_keyed FROM inserted i;
  IF any_running THEN
    RAISE EXCEPTION 'state: a job is inserted waiting (queued or scheduled); only a claim starts it'
      USING ERRCODE = 'check_violation', SCHEMA = 'skiplock', TABLE = 'jobs', COLUMN = 'state';
  END IF;

  IF any_keyed THEN
    INSERT INTO skiplock.dedup_keys AS k (tenant, queue, dedup_key, job_id)
    SELECT i.tenant, i.queue, i.dedup_key, i.id FROM inserted i
    WHERE i.dedup_key IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM skiplock.dedup_keys h
                      WHERE (h.tenant, h.queue, h.dedup_key) = (i.tenant, i.queue, i.dedup_key) AND h.job_id = i.id)
    ON CONFLICT (tenant, queue, dedup_key) DO UPDATE
      SET job_id = CASE WHEN k.expires_at <= now() THEN EXCLUDED.job_id ELSE k.job_id END,
          expires_at = CASE WHEN k.expires_at <= now() THEN NULL ELSE k.expires_at END;
    SELECT i.dedup_key, i.queue, i.tenant, h.job_id AS holder INTO taken
    FROM inserted i
    JOIN skiplock.dedup_keys h ON (h.tenant, h.queue, h.dedup_key) = (i.tenant, i.queue, i.dedup_key)
    WHERE h.job_id <> i.id
    LIMIT 1;
    IF FOUND THEN
      RAISE EXCEPTION 'dedup_key: job % holds the key % in queue % of tenant %; skiplock.enqueue() returns that job instead',
        taken.holder, taken.dedup_key, taken.queue, taken.tenant
        USING ERRCODE = 'unique_violation', SCHEMA = 'skiplock', TABLE = 'dedup_keys',
              CONSTRAINT = 'dedup_keys_pkey', COLUMN = 'dedup_key';
    END IF;
  END IF;

  IF skiplock.anyone_listening() THEN
    PERFORM pg_notify('skiplock_jobs', '');
  END IF;
  RETURN NULL;
END
$$;

CREATE TRIGGER jobs_inserted
  AFTER INSERT ON skiplock.jobs
  REFERENCING NEW TABLE AS inserted
  FOR EACH STATEMENT EXECUTE FUNCTION skiplock.on_jobs_inserted();

-- ---------------------------------------------------------------------------
-- The SQL API: enqueue, complete and fail from plain SQL
-- ---------------------------------------------------------------------------

-- Refuses a call's argument (or a column's value): the message starts with
-- its name.
CREATE FUNCTION skiplock.refuse(field text, problem text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '%: %', field, problem USING ERRCODE = 'invalid_parameter_value', COLUMN = field;
END
$$;

-- The jobs of an enqueue, from the JSON array the engine sends (the
-- camelCase fields of its EnqueueInput), with every default filled in: one
-- clock reading for the batch, and ids in input order (see uuid_v7).
CREATE FUNCTION skiplock.enqueue_rows(jobs jsonb)
RETURNS TABLE (
  ordinal bigint, id uuid, queue text, type text, tenant text, payload jsonb, priority smallint,
  run_at timestamptz, max_attempts smallint, lease_seconds integer, backoff_base_seconds real,
  backoff_max_seconds real, expires_at timestamptz, dedup_key text, dedup_window_seconds integer,
  callback_url text, failure_callback_url text)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  SELECT i.ordinal, skiplock.uuid_v7(clock.at, i.ordinal::integer, clock.seed) AS id,
         i.job->>'queue' AS queue,
         coalesce(i.job->>'type', i.job->>'queue') AS type,
         coalesce(i.job->>'tenant', 'default') AS tenant,
         coalesce(i.job->'payload', 'null') AS payload,
         coalesce((i.job->>'priority')::smallint, 0::smallint) AS priority,
         coalesce((i.job->>'runAt')::timestamptz,
                  now() + make_interval(secs => coalesce((i.job->>'delaySeconds')::float8, 0))) AS run_at,
         coalesce((i.job->>'maxAttempts')::smallint, 5::smallint) AS max_attempts,
         coalesce((i.job->>'leaseSeconds')::integer, 60) AS lease_seconds,
         coalesce((i.job->>'backoffBaseSeconds')::real, 1) AS backoff_base_seconds,
         coalesce((i.job->>'backoffMaxSeconds')::real, 3600) AS backoff_max_seconds,
         coalesce((i.job->>'expiresAt')::timestamptz,
                  now() + make_interval(secs => (i.job->>'ttlSeconds')::float8)) AS expires_at,
         i.job->>'dedupKey' AS dedup_key,
         coalesce((i.job->>'dedupWindowSeconds')::integer, 0) AS dedup_window_seconds,
         i.job->>'callbackUrl' AS callback_url,
         i.job->>'failureCallbackUrl' AS failure_callback_url
  FROM jsonb_array_elements(jobs) WITH ORDINALITY AS i(job, ordinal)
  -- OFFSET 0 keeps the planner from copying clock_timestamp() (and the
  -- draw of the ids' seed) into every use of at.
  CROSS JOIN (SELECT clock_timestamp() AS at, uuid_send(gen_random_uuid()) AS seed OFFSET 0) clock;
END
$$;

-- A job just enqueued, as enqueue_jobs returns it: the columns an insert
-- sets, as the API names them, since everything else of a new job is known
-- (no attempt yet). Far cheaper than building each job's JSON, which the
-- caller would only parse again. Made whole and then taken apart, since
-- (enqueued_job(j)).* would inline the function once per column whenever
-- the statement is planned.
CREATE TYPE skiplock.enqueued_job AS (
  id                   uuid,
  queue                text,
  type                 text,
  tenant               text,
  status               text,
  priority             integer,
  payload              jsonb,
  "maxAttempts"        integer,
  "leaseSeconds"       integer,
  "runAt"              json,
  "expiresAt"          json,
  "dedupKey"           text,
  "createdAt"          json,
  "callbackUrl"        text,
  "failureCallbackUrl" text
);

CREATE FUNCTION skiplock.enqueued_job(j skiplock.jobs) RETURNS skiplock.enqueued_job
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT ROW(j.id, j.queue, j.type, j.tenant, skiplock.job_status(j.state, j.run_at), j.priority, j.payload,
             j.max_attempts, j.lease_seconds, to_json(j.run_at), to_json(j.expires_at), j.dedup_key,
             to_json(j.created_at), j.callback_url, j.failure_callback_url)::skiplock.enqueued_job
$$;

-- Enqueues a batch of jobs (a single job is a batch of one): one
-- statement, all or none, a result per job in input order (the job, or the
-- job that holds its dedup key). The jobs table's insert trigger
-- (jobs_inserted) makes the tenant rows the claim needs on first sight.
-- A batch without dedup keys is one INSERT. Otherwise a job with a dedup
-- key is stored only if it wins its key in skiplock.dedup_keys, whose
-- unique key settles races between concurrent enqueues: a key in force
-- stays with its job (the no-op DO UPDATE returns that job's id even when
-- it committed after this statement's snapshot, and job is null then: the
-- caller reads heldBy again), a lapsed one (its job finished longer ago
-- than its dedup window) passes to the new job. A function so its plans
-- are kept per connection, as claim_batch's are: over Neon's HTTP driver
-- every statement is planned afresh, and planning this one cost more than
-- running it.
CREATE FUNCTION skiplock.enqueue_jobs(jobs jsonb)
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
  IF NOT jobs @? '$[*] ? (@.dedupKey != null)' THEN
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

-- Enqueues one job with every rule the engine applies (tenant row, dedup,
-- wake-up) and returns it as the API shows it: for a dedup hit, the job
-- that holds the key. A null argument takes the engine's default (5
-- attempts, a 60 s lease, no delay, backoff from 1 s up to an hour).
--
--   SELECT skiplock.enqueue('emails', '{"to": "a@example.com"}', tenant => 'acme',
--                           delay => interval '5 minutes')->>'id';
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
  failure_callback_url text        DEFAULT NULL)
RETURNS json
LANGUAGE plpgsql AS $$
DECLARE
  enqueued json;
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
      -- jobs_inserted makes the tenant row, takes the key and wakes workers.
      INSERT INTO skiplock.jobs AS j
        (queue, type, tenant, payload, priority, state, run_at, max_attempts, lease_seconds,
         backoff_base_seconds, backoff_max_seconds, expires_at, dedup_key, dedup_window_seconds,
         callback_url, failure_callback_url)
      VALUES (queue, coalesce(type, queue), tenant, coalesce(payload, 'null'), coalesce(priority, 0),
              CASE WHEN start_at > now() THEN 'scheduled' ELSE 'queued' END, start_at, coalesce(max_attempts, 5),
              coalesce(lease_seconds, 60), coalesce(backoff_base_seconds, 1), coalesce(backoff_max_seconds, 3600),
              expires_at, dedup_key, coalesce(dedup_window_seconds, 0), callback_url, failure_callback_url)
      RETURNING skiplock.job_json(j) INTO enqueued;
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

-- Completes a running job with its result while lease_token still owns it
-- (skiplock.complete_jobs): returns the finished job, or null when the token
-- no longer owns it (the lease was taken over, or the job already ended).
CREATE FUNCTION skiplock.complete(job_id uuid, lease_token uuid, result jsonb DEFAULT NULL) RETURNS json
LANGUAGE sql AS $$
  SELECT c.job FROM skiplock.complete_jobs(ARRAY[job_id], ARRAY[lease_token], NULL, jsonb_build_array(result), true) c
$$;

-- Ends attempts with an error, each while its lease token still owns the
-- job: a job retries after its backoff (full jitter: a uniform draw from 0
-- to min(max, base * 2^(attempt-1)) seconds, or exactly retryInSeconds)
-- unless its attempts are spent or forGood says it can never succeed; a job
-- whose cancellation was asked for ends cancelled. Each failure is
-- {id, leaseToken, error, retryInSeconds, forGood, heldMs} (heldMs as in
-- complete_jobs); the attempt's event says when it started, how long it
-- waited for that from when it was due (waitMs) and how long it ran
-- (runMs). One row per job it changed (a stale token changes nothing and
-- gives no row), with the outcome, and the job when with_jobs asks. Its
-- plan is kept per connection for the reason complete_jobs' is.
CREATE FUNCTION skiplock.fail_jobs(failures jsonb, with_jobs boolean)
RETURNS TABLE (id uuid, outcome text, job json)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET jit = off
AS $$
#variable_conflict use_column
BEGIN
  IF EXISTS (SELECT 1 FROM jsonb_array_elements(failures) f WHERE (f->>'retryInSeconds')::float8 < 0) THEN
    PERFORM skiplock.refuse('retry_in_seconds', 'must not be negative');
  END IF;
  RETURN QUERY
  WITH input AS MATERIALIZED (
    SELECT * FROM jsonb_to_recordset(failures)
      AS x(id uuid, "leaseToken" uuid, error jsonb, "retryInSeconds" float8, "forGood" boolean, "heldMs" float8)
  ),
  attempt AS MATERIALIZED (
    SELECT j.id, i."leaseToken" AS lease_token, i.error, coalesce(i."heldMs", 0) AS held_ms, j.run_at AS due_at,
           skiplock.handler_started_at(j.started_at, coalesce(i."heldMs", 0)) AS handler_started_at,
           CASE WHEN j.cancel_requested_at IS NOT NULL THEN 'cancelled'
                WHEN coalesce(i."forGood", false) OR j.attempts >= j.max_attempts THEN 'failed'
                ELSE 'retrying' END AS outcome,
           coalesce(i."retryInSeconds",
                    random() * least(j.backoff_max_seconds, j.backoff_base_seconds * 2 ^ (j.attempts - 1))) AS delay
    FROM input i
    -- The token matches only while the job runs (jobs_lease_while_running).
    JOIN skiplock.jobs j ON j.id = i.id AND j.lease_token = i."leaseToken"
  ),
  retrying AS (
    UPDATE skiplock.jobs j
    SET state = 'retrying', last_error = a.error, lease_token = NULL, lease_expires_at = NULL,
        run_at = now() + make_interval(secs => a.delay), started_at = a.handler_started_at,
        run_ms = j.run_ms + skiplock.ms_between(a.handler_started_at, clock_timestamp())
    FROM attempt a
    WHERE j.id = a.id AND j.lease_token = a.lease_token AND a.outcome = 'retrying'
    RETURNING j.id, j.attempts, j.worker_id, j.started_at, a.due_at, 'retrying'::text AS outcome, j.run_at, a.error,
              CASE WHEN with_jobs THEN skiplock.job_json(j) END AS job
  ),
  ended AS (
    DELETE FROM skiplock.jobs j
    USING attempt a
    WHERE j.id = a.id AND j.lease_token = a.lease_token AND a.outcome <> 'retrying'
    RETURNING skiplock.as_finished(j, a.outcome, NULL, a.error, a.held_ms) AS finished
  ),
  finished AS (
    INSERT INTO skiplock.finished_jobs
    SELECT (e.finished).* FROM ended e
    RETURNING finished_jobs.id, finished_jobs.attempts, finished_jobs.worker_id, finished_jobs.started_at,
              finished_jobs.run_at AS due_at, finished_jobs.state AS outcome, NULL::timestamptz AS run_at,
              finished_jobs.last_error AS error, CASE WHEN with_jobs THEN skiplock.job_json(finished_jobs) END AS job
  ),
  ended_attempt AS (
    SELECT * FROM retrying UNION ALL SELECT * FROM finished
  ),
  events AS (
    INSERT INTO skiplock.job_events (job_id, kind, attempt, worker_id, detail)
    SELECT e.id, CASE e.outcome WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END, e.attempts, e.worker_id,
           jsonb_build_object('error', e.error, 'startedAt', e.started_at,
                              'retryAt', CASE WHEN e.outcome = 'retrying' THEN skiplock.iso(e.run_at) END,
                              'waitMs', greatest(0, skiplock.ms_between(e.due_at, e.started_at)),
                              'runMs', skiplock.ms_between(e.started_at, clock_timestamp()))
    FROM ended_attempt e
  )
  SELECT e.id, e.outcome, e.job FROM ended_attempt e;
END
$$;

-- One failure (see fail_jobs): returns the job, or null when the token no
-- longer owns it.
CREATE FUNCTION skiplock.fail(
  job_id uuid, lease_token uuid, error jsonb, retry_in_seconds double precision DEFAULT NULL,
  for_good boolean DEFAULT false)
RETURNS json
LANGUAGE sql AS $$
  SELECT f.job FROM skiplock.fail_jobs(jsonb_build_array(jsonb_build_object(
    'id', job_id, 'leaseToken', lease_token, 'error', error, 'retryInSeconds', retry_in_seconds,
    'forGood', for_good)), true) f
$$;

-- Changes the priority or start time (run_at, or a delay from now) of a
-- waiting job, under its row lock so a claim cannot take it halfway; a null
-- leaves that one as it is. A job moved to the future waits as scheduled,
-- one moved to now as queued; a job waiting for a retry stays retrying. The
-- change is recorded as a `rescheduled` event with what it was. One row for
-- a live job (only_tenant: of that tenant): the job, and 'rescheduled', or
-- 'not_waiting' (it runs) or 'after_expiry' (the new time is at or past its
-- expires_at, so it could never start), which change nothing. No row for a
-- finished job or none.
CREATE FUNCTION skiplock.reschedule(
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
           coalesce(greatest(coalesce(reschedule.run_at, now() + reschedule.delay), now()), j.run_at) AS new_run_at
    FROM skiplock.jobs j
    WHERE j.id = reschedule.job_id AND (only_tenant IS NULL OR j.tenant = only_tenant)
    FOR UPDATE
  ),
  changed AS (
    UPDATE skiplock.jobs j
    SET priority = t.new_priority,
        run_at = t.new_run_at,
        state = CASE WHEN (reschedule.run_at IS NULL AND reschedule.delay IS NULL) OR j.state = 'retrying' THEN j.state
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

-- skiplock.all_jobs takes updates of a waiting job's priority and run_at
-- (skiplock.reschedule); a change to any other column, or to a running or
-- finished job, is refused.
CREATE FUNCTION skiplock.reschedule_from_view() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  changed_column text;
  rescheduled record;
BEGIN
  SELECT n.key INTO changed_column
  FROM jsonb_each(to_jsonb(NEW)) n JOIN jsonb_each(to_jsonb(OLD)) o USING (key)
  WHERE n.value IS DISTINCT FROM o.value AND n.key NOT IN ('priority', 'run_at')
  LIMIT 1;
  IF FOUND THEN
    PERFORM skiplock.refuse(changed_column, 'only priority and run_at of a waiting job change through skiplock.all_jobs');
  END IF;
  SELECT * INTO rescheduled FROM skiplock.reschedule(OLD.id,
    priority => CASE WHEN NEW.priority IS DISTINCT FROM OLD.priority THEN NEW.priority END,
    run_at => CASE WHEN NEW.run_at IS DISTINCT FROM OLD.run_at THEN NEW.run_at END);
  IF NOT FOUND OR rescheduled.outcome = 'not_waiting' THEN
    PERFORM skiplock.refuse('state', format('job %s is %s: only a waiting job can be rescheduled', OLD.id, OLD.state));
  ELSIF rescheduled.outcome = 'after_expiry' THEN
    PERFORM skiplock.refuse('run_at', format('job %s expires at %s, before it could start', OLD.id, OLD.expires_at));
  END IF;
  SELECT * INTO NEW FROM skiplock.all_jobs a WHERE a.id = OLD.id;
  RETURN NEW;
END
$$;

CREATE TRIGGER all_jobs_update_reschedules
  INSTEAD OF UPDATE ON skiplock.all_jobs
  FOR EACH ROW EXECUTE FUNCTION skiplock.reschedule_from_view();

-- skiplock.all_jobs takes inserts: each row is enqueued by skiplock.enqueue,
-- and RETURNING shows the job as stored. A new job waits, so the columns
-- that only running it sets are refused, as is a state other than queued or
-- scheduled (the job's run_at decides which). Bulk inserts go faster
-- straight into skiplock.jobs, which jobs_inserted keeps consistent too.
CREATE FUNCTION skiplock.enqueue_from_view() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  enqueued json;
BEGIN
  IF NEW.state NOT IN ('queued', 'scheduled') THEN
    PERFORM skiplock.refuse('state', format('a new job waits (queued, or scheduled by its run_at), it cannot be %s', NEW.state));
  END IF;
  PERFORM skiplock.refuse(c.field, 'set by skiplock as the job runs, not by an insert')
  FROM (VALUES ('id', NEW.id IS NOT NULL), ('attempts', NEW.attempts <> 0), ('created_at', NEW.created_at IS NOT NULL),
               ('first_started_at', NEW.first_started_at IS NOT NULL), ('started_at', NEW.started_at IS NOT NULL),
               ('worker_id', NEW.worker_id IS NOT NULL), ('lease_token', NEW.lease_token IS NOT NULL),
               ('lease_expires_at', NEW.lease_expires_at IS NOT NULL),
               ('cancel_requested_at', NEW.cancel_requested_at IS NOT NULL), ('progress', NEW.progress IS NOT NULL),
               ('last_error', NEW.last_error IS NOT NULL), ('finished_at', NEW.finished_at IS NOT NULL),
               ('result', NEW.result IS NOT NULL)) AS c(field, given)
  WHERE c.given
  LIMIT 1;
  enqueued := skiplock.enqueue(
    queue => NEW.queue, payload => NEW.payload, tenant => coalesce(NEW.tenant, 'default'), type => NEW.type,
    priority => NEW.priority, run_at => NEW.run_at, max_attempts => NEW.max_attempts,
    lease_seconds => NEW.lease_seconds, expires_at => NEW.expires_at, dedup_key => NEW.dedup_key,
    dedup_window_seconds => NEW.dedup_window_seconds, backoff_base_seconds => NEW.backoff_base_seconds,
    backoff_max_seconds => NEW.backoff_max_seconds, callback_url => NEW.callback_url,
    failure_callback_url => NEW.failure_callback_url);
  SELECT * INTO NEW FROM skiplock.all_jobs a WHERE a.id = (enqueued->>'id')::uuid;
  RETURN NEW;
END
$$;

CREATE TRIGGER all_jobs_insert_enqueues
  INSTEAD OF INSERT ON skiplock.all_jobs
  FOR EACH ROW EXECUTE FUNCTION skiplock.enqueue_from_view();

-- ---------------------------------------------------------------------------
-- Periodic jobs
-- ---------------------------------------------------------------------------

-- next_run_at moves forward by compare-and-set, so two drains that overlap
-- enqueue each tick once.
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

-- ---------------------------------------------------------------------------
-- API keys
-- ---------------------------------------------------------------------------

-- Only the SHA-256 of a key's secret is stored: the secret is shown once,
-- when the key is made. A key is found by the hash of the secret a request
-- presents, so the database compares hashes, never secrets. Revoking keeps
-- the row, so the list of keys stays an audit trail.
CREATE TABLE skiplock.api_keys (
  id            uuid        PRIMARY KEY DEFAULT skiplock.uuid_v7(clock_timestamp()),
  name          text        NOT NULL,
  -- Lowercase hex SHA-256 of the whole secret.
  secret_sha256 text        NOT NULL UNIQUE,
  -- The start of the secret, kept so people can tell their keys apart.
  secret_prefix text        NOT NULL,
  scopes        text[]      NOT NULL,
  -- A tenant-bound key sees and touches only this tenant's jobs.
  tenant        text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  revoked_at    timestamptz,
  CONSTRAINT api_keys_name_length CHECK (length(name) BETWEEN 1 AND 128),
  CONSTRAINT api_keys_hash_format CHECK (secret_sha256 ~ '^[0-9a-f]{64}$'),
  CONSTRAINT api_keys_scopes_known CHECK (
    cardinality(scopes) >= 1 AND scopes <@ ARRAY['admin', 'enqueue', 'read', 'worker']::text[]),
  CONSTRAINT api_keys_tenant_length CHECK (tenant IS NULL OR length(tenant) BETWEEN 1 AND 128),
  -- Admin reaches every tenant (tenant settings, keys), so it cannot be bound to one.
  CONSTRAINT api_keys_admin_unbound CHECK (tenant IS NULL OR NOT 'admin' = ANY (scopes))
);
