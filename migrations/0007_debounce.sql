-- skiplock 0007: debounce, and what a dedup key does on a conflict.
--
-- A dedup key (per tenant and queue) gets a rule for the job that already
-- holds it:
-- - `dedupOnConflict`: 'return' it (0001's dedup, the default), 'replace'
--   its payload (and its run time, when the enqueue gives one) while it has
--   not started, or 'refuse' the enqueue naming it;
-- - `dedupScope`: the key counts its job while it is 'waitingOrRunning'
--   (and for its dedup window after it ends: 0001's), or only while it is
--   'waiting' (never started): then a new job may wait while one runs.
-- A debounce key is a dedup key whose rule is 'replace' in the 'waiting'
-- scope, and whose every enqueue moves the job's start to the end of its
-- period from now, never past the burst's first enqueue (the job's
-- created_at) plus maxDelay: one job runs per burst, with the last payload.
--
-- Such an enqueue goes one job at a time through enqueue_singleton, under
-- an advisory lock of its key, and locks the holder's row before it reads
-- the key again, in the order a job's end takes them (its row, then its key
-- in finished_jobs_release_dedup_key). A claim that has the holder locked
-- is waited for, so a job is changed only while it has not started, and a
-- job that has started makes the next enqueue a new burst. Enqueues of one
-- key take turns, so the last to commit wrote the payload that runs.

ALTER TABLE skiplock.job_events DROP CONSTRAINT job_events_kind_known;
ALTER TABLE skiplock.job_events ADD CONSTRAINT job_events_kind_known CHECK (kind IN
  ('lease_extended', 'failed', 'retried', 'released', 'cancel_requested', 'cancelled', 'expired',
   'lease_expired', 'rescheduled', 'callback_enqueued', 'parked', 'resumed', 'held', 'debounced',
   'replaced')) NOT VALID;
ALTER TABLE skiplock.job_events VALIDATE CONSTRAINT job_events_kind_known;

-- What enqueue_jobs answers for each job: the new job's columns, or for a
-- key's existing job (deduplicated) nulls, its id and the job as it is now
-- (heldJob is null when it committed after the statement began: read it
-- again); `debounced` or `replaced` when the enqueue changed that job.
CREATE TYPE skiplock.enqueue_answer AS (
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
  "failureCallbackUrl" text,
  deduplicated         boolean,
  "heldBy"             uuid,
  "heldJob"            json,
  debounced            boolean,
  replaced             boolean
);

-- One job whose key has a rule (debounceKey, dedupOnConflict or
-- dedupScope): refuses what cannot combine by the field's name, then
-- settles the key as the header says. A new job goes through enqueue_jobs
-- with a plain dedup key, so it is stored as any other (concurrency keys
-- included).
CREATE FUNCTION skiplock.enqueue_singleton(job jsonb)
RETURNS SETOF skiplock.enqueue_answer
LANGUAGE plpgsql AS $$
DECLARE
  debouncing boolean := job->>'debounceKey' IS NOT NULL;
  key text := coalesce(job->>'debounceKey', job->>'dedupKey');
  key_tenant text := coalesce(job->>'tenant', 'default');
  key_queue text := job->>'queue';
  on_conflict text := CASE WHEN job->>'debounceKey' IS NOT NULL THEN 'replace'
                            ELSE coalesce(job->>'dedupOnConflict', 'return') END;
  scope text := CASE WHEN job->>'debounceKey' IS NOT NULL THEN 'waiting'
                      ELSE coalesce(job->>'dedupScope', 'waitingOrRunning') END;
  period integer := (job->>'debouncePeriodSeconds')::integer;
  max_delay integer := (job->>'debounceMaxDelaySeconds')::integer;
  held_id uuid;
  held_until timestamptz;
  again_id uuid;
  again_until timestamptz;
  holder skiplock.jobs;
  unstarted boolean;
  start_at timestamptz;
  enqueues integer;
  answer skiplock.enqueue_answer;
  races integer := 0;
BEGIN
  IF debouncing THEN
    IF job @? '$ ? (@.dedupKey != null || @.dedupOnConflict != null || @.dedupScope != null
                    || @.dedupWindowSeconds != null)' THEN
      PERFORM skiplock.refuse('debounceKey', 'a debounce key is the job''s dedup key: give no dedupKey, dedupOnConflict, dedupScope or dedupWindowSeconds');
    ELSIF job->>'orderingKey' IS NOT NULL THEN
      PERFORM skiplock.refuse('debounceKey', 'cannot combine with an orderingKey: debounce folds jobs into one, an ordering key runs each in turn');
    ELSIF job @? '$ ? (@.runAt != null || @.delaySeconds != null)' THEN
      PERFORM skiplock.refuse('debounceKey', 'the debounce period sets the start: give no runAt or delaySeconds');
    ELSIF key IS NULL OR length(key) NOT BETWEEN 1 AND 256 THEN
      PERFORM skiplock.refuse('debounceKey', 'a key of 1 to 256 characters');
    ELSIF period IS NULL OR period NOT BETWEEN 1 AND 315360000 THEN
      PERFORM skiplock.refuse('debouncePeriodSeconds', format('from 1 to 315360000 seconds, not %s', coalesce(period::text, 'none')));
    ELSIF max_delay < period OR max_delay > 315360000 THEN
      PERFORM skiplock.refuse('debounceMaxDelaySeconds', format('from the period (%s) to 315360000 seconds, not %s', period, max_delay));
    END IF;
  ELSIF period IS NOT NULL OR max_delay IS NOT NULL THEN
    PERFORM skiplock.refuse(CASE WHEN period IS NOT NULL THEN 'debouncePeriodSeconds' ELSE 'debounceMaxDelaySeconds' END,
                            'needs a debounceKey');
  ELSIF key IS NULL THEN
    PERFORM skiplock.refuse(CASE WHEN job->>'dedupOnConflict' IS NOT NULL THEN 'dedupOnConflict' ELSE 'dedupScope' END,
                            'needs a dedupKey');
  ELSIF on_conflict NOT IN ('return', 'replace', 'refuse') THEN
    PERFORM skiplock.refuse('dedupOnConflict', format('return, replace or refuse, not %s', on_conflict));
  ELSIF scope NOT IN ('waiting', 'waitingOrRunning') THEN
    PERFORM skiplock.refuse('dedupScope', format('waiting or waitingOrRunning, not %s', scope));
  ELSIF scope = 'waiting' AND coalesce((job->>'dedupWindowSeconds')::integer, 0) > 0 THEN
    PERFORM skiplock.refuse('dedupWindowSeconds', 'a key of the waiting scope never counts an ended job: give no window');
  END IF;

  PERFORM pg_advisory_xact_lock(hashtextextended(jsonb_build_array('dedup', key_tenant, key_queue, key)::text, 0));
  LOOP
    SELECT k.job_id, k.expires_at INTO held_id, held_until FROM skiplock.dedup_keys k
    WHERE (k.tenant, k.queue, k.dedup_key) = (key_tenant, key_queue, key) AND (k.expires_at IS NULL OR k.expires_at > now());
    IF FOUND THEN
      -- Waits for a claim or an end of the job under way; a job that ended is no longer here.
      SELECT j.* INTO holder FROM skiplock.jobs j WHERE j.id = held_id FOR UPDATE;
      SELECT k.job_id, k.expires_at INTO again_id, again_until FROM skiplock.dedup_keys k
      WHERE (k.tenant, k.queue, k.dedup_key) = (key_tenant, key_queue, key) AND (k.expires_at IS NULL OR k.expires_at > now());
      -- It ended meanwhile, and its end changed the key: look again.
      CONTINUE WHEN again_id IS DISTINCT FROM held_id OR again_until IS DISTINCT FROM held_until;
      unstarted := coalesce(holder.state IN ('scheduled', 'queued', 'held') AND holder.first_started_at IS NULL, false);
      IF scope = 'waiting' AND NOT unstarted THEN
        -- Its job started (or ended): the key passes to a new one.
        DELETE FROM skiplock.dedup_keys k
        WHERE (k.tenant, k.queue, k.dedup_key) = (key_tenant, key_queue, key) AND k.job_id = held_id;
      ELSIF on_conflict = 'return' THEN
        SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
               true, a.id, skiplock.job_json(a), false, false INTO answer
        FROM skiplock.all_jobs a WHERE a.id = held_id;
        RETURN NEXT answer;
        RETURN;
      ELSIF on_conflict = 'refuse' OR NOT unstarted THEN
        RAISE EXCEPTION '%', format('dedup_key: job %s holds the key %s in queue %s of tenant %s%s',
          held_id, key, key_queue, key_tenant,
          CASE WHEN on_conflict = 'refuse' THEN ''
               ELSE format(' and has %s, so it cannot be replaced', CASE WHEN holder.id IS NULL THEN 'ended' ELSE 'started' END) END)
          USING ERRCODE = 'unique_violation', SCHEMA = 'skiplock', TABLE = 'dedup_keys',
                CONSTRAINT = 'dedup_keys_pkey', COLUMN = 'dedup_key', DETAIL = held_id::text;
      ELSE
        start_at := CASE
          WHEN debouncing THEN least(now() + make_interval(secs => period),
                                     holder.created_at + make_interval(secs => max_delay))
          WHEN job->>'runAt' IS NOT NULL THEN (job->>'runAt')::timestamptz
          WHEN job->>'delaySeconds' IS NOT NULL THEN now() + make_interval(secs => (job->>'delaySeconds')::float8)
          ELSE holder.run_at END;
        UPDATE skiplock.jobs j
        SET payload = coalesce(job->'payload', 'null'), run_at = start_at,
            state = CASE WHEN j.state = 'held' THEN 'held' WHEN start_at > now() THEN 'scheduled' ELSE 'queued' END
        WHERE j.id = held_id
        RETURNING j.* INTO holder;
        SELECT count(*)::integer + 1 INTO enqueues
        FROM skiplock.job_events e WHERE e.job_id = held_id AND e.kind = 'debounced';
        INSERT INTO skiplock.job_events (job_id, kind, attempt, detail)
        VALUES (held_id, CASE WHEN debouncing THEN 'debounced' ELSE 'replaced' END, holder.attempts,
                jsonb_strip_nulls(jsonb_build_object(
                  'key', key, 'runAt', skiplock.iso(start_at),
                  'enqueues', CASE WHEN debouncing THEN enqueues END,
                  'latestRunAt', skiplock.iso(holder.created_at + make_interval(secs => max_delay)))));
        SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
               true, holder.id, skiplock.job_json(holder), debouncing, NOT debouncing INTO answer;
        RETURN NEXT answer;
        RETURN;
      END IF;
    END IF;

    SELECT * INTO answer FROM skiplock.enqueue_jobs(jsonb_build_array(
      job - 'debounceKey' - 'debouncePeriodSeconds' - 'debounceMaxDelaySeconds' - 'dedupOnConflict' - 'dedupScope'
        || jsonb_build_object('dedupKey', key)
        || CASE WHEN debouncing THEN jsonb_build_object('delaySeconds', period) ELSE '{}' END));
    IF NOT answer.deduplicated THEN
      IF debouncing THEN
        INSERT INTO skiplock.job_events (job_id, kind, attempt, detail)
        VALUES (answer.id, 'debounced', 0, jsonb_strip_nulls(jsonb_build_object(
                  'key', key, 'runAt', skiplock.iso((answer."runAt" #>> '{}')::timestamptz), 'enqueues', 1,
                  'latestRunAt', skiplock.iso(now() + make_interval(secs => max_delay)))));
      END IF;
      RETURN NEXT answer;
      RETURN;
    END IF;
    -- An enqueue without a rule took the key meanwhile: settle with its job.
    -- Twice means this transaction's snapshot cannot see that job.
    races := races + 1;
    IF races > 1 THEN
      RAISE EXCEPTION 'dedup_key: the key % changed under this transaction''s snapshot; retry it', key
        USING ERRCODE = 'serialization_failure';
    END IF;
  END LOOP;
END
$$;

-- 0006's enqueue_jobs, answering enqueue_answer rows, and sending each
-- job whose key has a rule through enqueue_singleton, in input order.
DROP FUNCTION skiplock.enqueue_jobs(jsonb);
CREATE FUNCTION skiplock.enqueue_jobs(jobs jsonb)
RETURNS SETOF skiplock.enqueue_answer
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
  one jsonb;
BEGIN
  IF NOT jobs @? '$[*] ? (@.dedupKey != null || @.concurrencyKey != null || @.orderingKey != null
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
           (SELECT skiplock.job_json(a) FROM skiplock.all_jobs a WHERE a.id = key.job_id) END AS "heldJob",
         false, false
  FROM input i
  LEFT JOIN written inserted ON (inserted.job).id = i.id
  LEFT JOIN keys key
    ON inserted.job IS NULL AND key.tenant = i.tenant AND key.queue = i.queue AND key.dedup_key = i.dedup_key
  ORDER BY i.ordinal;
END
$$;

-- 0006's enqueue, with a rule for the dedup key (dedup_on_conflict:
-- 'return', 'replace' or 'refuse'; dedup_scope: 'waitingOrRunning' or
-- 'waiting') or a debounce key (debounce_key with debounce_period_seconds
-- and, optionally, debounce_max_delay_seconds). An enqueue with either
-- returns the key's job when it took it over (debounced or replaced);
-- skiplock.enqueue_jobs says which.
--
--   SELECT skiplock.enqueue('reindex', '{"account": "7"}', tenant => 'acme', debounce_key => 'account:7',
--                           debounce_period_seconds => 30, debounce_max_delay_seconds => 300)->>'id';
DROP FUNCTION skiplock.enqueue(text, jsonb, text, text, integer, timestamptz, interval, integer, integer, timestamptz,
                               text, integer, real, real, text, text, text, integer, text, text);
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
  debounce_max_delay_seconds integer     DEFAULT NULL)
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
      'concurrencyKey', concurrency_key, 'concurrencyLimit', concurrency_limit, 'dedupOnConflict', dedup_on_conflict,
      'dedupScope', dedup_scope, 'debounceKey', debounce_key, 'debouncePeriodSeconds', debounce_period_seconds,
      'debounceMaxDelaySeconds', debounce_max_delay_seconds)) || jsonb_build_object('payload', coalesce(payload, 'null'))) e;
    IF enqueued IS NULL THEN
      -- A new job, read after the insert trigger has settled its turn.
      SELECT skiplock.job_json(j) INTO enqueued FROM skiplock.jobs j WHERE j.id = new_id;
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

-- 0006's enqueue_flow, refusing key rules as well: a flow's job is its
-- own, never one that an earlier enqueue made.
CREATE OR REPLACE FUNCTION skiplock.enqueue_flow(jobs jsonb, dependencies jsonb)
RETURNS SETOF json
LANGUAGE plpgsql AS $$
DECLARE
  ids uuid[];
BEGIN
  IF jobs @? '$[*] ? (@.concurrencyKey != null || @.orderingKey != null)' THEN
    PERFORM skiplock.refuse('jobs', 'a job of a flow cannot name a concurrency key or an ordering key');
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
