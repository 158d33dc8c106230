-- skiplock 0004: durable steps, sleeps, waits for events, child jobs and flows.
--
-- A handler's steps are recorded against its job (skiplock.job_steps), each
-- write fenced by the attempt's lease token, so a later run of the job (a
-- retry, a resume, a new drain after the budget ran out, a crash) returns a
-- recorded step's result instead of running it again. A job that sleeps,
-- waits for an event or for other jobs is parked: it goes back to waiting
-- (state scheduled) with its run time set to when it must resume, its lease
-- and slot handed back and its attempt not counted, so nothing holds a
-- worker, a connection or a tenant slot while it waits. What wakes it early
-- (an event, a child's end, the last dependency's end) sets its run time to
-- now in the statement that records what it waited for.

-- The run time of a job parked until something happens rather than until a
-- time (a child's end, its dependencies): far enough to be never, near
-- enough that every client reads it as a date.
CREATE FUNCTION skiplock.until_woken() RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT timestamptz '9999-12-31 00:00:00+00'
$$;

ALTER TABLE skiplock.job_events DROP CONSTRAINT job_events_kind_known;
ALTER TABLE skiplock.job_events ADD CONSTRAINT job_events_kind_known CHECK (kind IN
  ('lease_extended', 'failed', 'retried', 'released', 'cancel_requested', 'cancelled', 'expired',
   'lease_expired', 'rescheduled', 'callback_enqueued', 'parked', 'resumed'));

ALTER TABLE skiplock.api_keys DROP CONSTRAINT api_keys_scopes_known;
ALTER TABLE skiplock.api_keys ADD CONSTRAINT api_keys_scopes_known CHECK (
  cardinality(scopes) >= 1 AND scopes <@ ARRAY['admin', 'enqueue', 'read', 'worker', 'events']::text[]);

-- ---------------------------------------------------------------------------
-- Steps
-- ---------------------------------------------------------------------------

-- A job's steps by name, the name being the memo key. A step is done once
-- its result is recorded (done); a `do` step that failed and waits to retry
-- keeps its failed attempts and last error here until then. The job id is
-- not a foreign key: a job moves from jobs to finished_jobs as it ends, and
-- its steps stay with it as history.
CREATE TABLE skiplock.job_steps (
  job_id          uuid        NOT NULL,
  name            text        NOT NULL,
  kind            text        NOT NULL,
  done            boolean     NOT NULL,
  result          jsonb,
  failed_attempts integer     NOT NULL DEFAULT 0,
  last_error      jsonb,
  -- The job's attempt that recorded it (null when an event or a child's end did).
  attempt         integer,
  recorded_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (job_id, name),
  CONSTRAINT job_steps_name_length CHECK (length(name) BETWEEN 1 AND 200),
  CONSTRAINT job_steps_kind_known CHECK (kind IN ('do', 'sleep', 'event', 'invoke'))
);

-- A step's results recorded in one statement for any number of jobs, each
-- fenced by its attempt's lease token, whose lease the same statement
-- extends. Answers the ids whose token still owns the job: a step of an
-- attempt that lost its lease records nothing (the new owner's wins).
CREATE FUNCTION skiplock.record_steps(steps jsonb)
RETURNS TABLE (job_id uuid, name text)
LANGUAGE sql AS $$
  WITH input AS MATERIALIZED (
    SELECT * FROM jsonb_to_recordset(steps)
      AS x("jobId" uuid, "leaseToken" uuid, name text, result jsonb, "leaseSeconds" integer)
  ),
  owned AS (
    UPDATE skiplock.jobs j
    SET lease_expires_at = greatest(j.lease_expires_at, now() + make_interval(secs => i."leaseSeconds"))
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
  RETURNING s.job_id, s.name
$$;

-- Parks a running job (its token checked by the caller, the row locked):
-- back to waiting until `until`, its lease ended and its attempt not
-- counted, with the reason in its history.
CREATE FUNCTION skiplock.park(j skiplock.jobs, until timestamptz, detail jsonb) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  UPDATE skiplock.jobs
  SET state = 'scheduled', run_at = until, attempts = attempts - 1,
      lease_token = NULL, lease_expires_at = NULL,
      run_ms = run_ms + skiplock.ms_between(started_at, clock_timestamp())
  WHERE id = j.id;
  INSERT INTO skiplock.job_events (job_id, kind, attempt, worker_id, detail)
  VALUES (j.id, 'parked', j.attempts, j.worker_id,
          detail || jsonb_build_object('until', CASE WHEN until < skiplock.until_woken() THEN skiplock.iso(until) END));
END
$$;

-- The running job a step belongs to, locked, or null when its token no
-- longer owns it.
CREATE FUNCTION skiplock.owned_job(job_id uuid, lease_token uuid) RETURNS skiplock.jobs
LANGUAGE sql AS $$
  SELECT j FROM skiplock.jobs j WHERE j.id = job_id AND j.lease_token = owned_job.lease_token FOR UPDATE
$$;

-- How a step that parks its job answers: the job's token no longer owns it,
-- its cancellation was asked for (the attempt ends cancelled instead), or
-- the step is done with this result.
CREATE FUNCTION skiplock.step_answer(status text, result jsonb DEFAULT NULL) RETURNS json
LANGUAGE sql IMMUTABLE AS $$
  SELECT json_build_object('status', status, 'result', result)
$$;

-- ctx.step.sleep and sleepUntil: records the sleep's end the first time,
-- and parks the job until then; a job woken before it (a manual retry)
-- sleeps again until the recorded end, never earlier.
CREATE FUNCTION skiplock.sleep_step(job_id uuid, lease_token uuid, name text, until timestamptz) RETURNS json
LANGUAGE plpgsql AS $$
DECLARE
  j skiplock.jobs := skiplock.owned_job(job_id, lease_token);
  recorded timestamptz;
BEGIN
  IF j.id IS NULL THEN
    RETURN skiplock.step_answer('lease-lost');
  END IF;
  INSERT INTO skiplock.job_steps AS s (job_id, name, kind, done, result, attempt)
  VALUES (j.id, name, 'sleep', true, jsonb_build_object('until', skiplock.iso(until)), j.attempts)
  ON CONFLICT ON CONSTRAINT job_steps_pkey DO UPDATE SET name = s.name
  RETURNING (s.result->>'until')::timestamptz INTO recorded;
  IF recorded IS NULL THEN
    PERFORM skiplock.refuse('name', format('step "%s" is a step of another kind', name));
  END IF;
  IF recorded <= clock_timestamp() THEN
    RETURN skiplock.step_answer('done');
  END IF;
  IF j.cancel_requested_at IS NOT NULL THEN
    RETURN skiplock.step_answer('cancel-requested');
  END IF;
  PERFORM skiplock.park(j, recorded, jsonb_build_object('step', name, 'sleep', true));
  RETURN skiplock.step_answer('parked');
END
$$;

-- A `do` step that failed with retries left: its failed attempts counted
-- and the job parked until the retry, its own attempt not counted.
CREATE FUNCTION skiplock.step_failed(job_id uuid, lease_token uuid, name text, error jsonb, retry_at timestamptz)
RETURNS json
LANGUAGE plpgsql AS $$
DECLARE
  j skiplock.jobs := skiplock.owned_job(job_id, lease_token);
  failures integer;
BEGIN
  IF j.id IS NULL THEN
    RETURN skiplock.step_answer('lease-lost');
  END IF;
  INSERT INTO skiplock.job_steps AS s (job_id, name, kind, done, failed_attempts, last_error, attempt)
  VALUES (j.id, name, 'do', false, 1, error, j.attempts)
  ON CONFLICT ON CONSTRAINT job_steps_pkey DO UPDATE
    SET failed_attempts = s.failed_attempts + 1, last_error = EXCLUDED.last_error, attempt = EXCLUDED.attempt
    WHERE NOT s.done
  RETURNING s.failed_attempts INTO failures;
  IF j.cancel_requested_at IS NOT NULL THEN
    RETURN skiplock.step_answer('cancel-requested');
  END IF;
  PERFORM skiplock.park(j, retry_at, jsonb_build_object('step', name, 'failedAttempts', failures, 'error', error));
  RETURN skiplock.step_answer('parked');
END
$$;

-- ---------------------------------------------------------------------------
-- Events
-- ---------------------------------------------------------------------------

-- The last event of each name and key sent to a tenant, kept for its
-- window: a job that reaches its wait after the event was sent (but not
-- before the job was created) finds it there.
CREATE TABLE skiplock.events (
  tenant     skiplock.short_name NOT NULL,
  name       text        NOT NULL,
  -- '' when sent without a key.
  key        text        NOT NULL,
  payload    jsonb       NOT NULL,
  sent_at    timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (tenant, name, key)
);

-- Jobs parked in ctx.step.waitForEvent. A wait without a key takes an
-- event of that name with any key.
CREATE TABLE skiplock.event_waits (
  job_id     uuid        NOT NULL,
  step_name  text        NOT NULL,
  tenant     skiplock.short_name NOT NULL,
  event      text        NOT NULL,
  key        text,
  timeout_at timestamptz NOT NULL,
  since      timestamptz NOT NULL DEFAULT clock_timestamp(),
  PRIMARY KEY (job_id, step_name)
);
CREATE INDEX event_waits_event_idx ON skiplock.event_waits (tenant, event);

-- A sent event and a job starting its wait take this lock for the event's
-- tenant and name, so one always sees the other: an event sent while a job
-- parks either finds its wait or is found by it ('skev', a hash: two names
-- that collide only share a lock).
CREATE FUNCTION skiplock.lock_event(tenant text, event text) RETURNS void
LANGUAGE sql AS $$
  SELECT pg_advisory_xact_lock(1936418166, hashtext(tenant || '/' || event))
$$;

-- ctx.step.waitForEvent: the event's payload and time when it came (for an
-- earlier run's wait, or kept from before the wait began), null once the
-- timeout passed, else the job parked until the event or the timeout.
CREATE FUNCTION skiplock.wait_for_event(
  job_id uuid, lease_token uuid, name text, event text, key text, timeout_at timestamptz, lease_seconds integer)
RETURNS json
LANGUAGE plpgsql AS $$
DECLARE
  j skiplock.jobs := skiplock.owned_job(job_id, lease_token);
  recorded jsonb;
  waiting skiplock.event_waits;
BEGIN
  IF j.id IS NULL THEN
    RETURN skiplock.step_answer('lease-lost');
  END IF;
  PERFORM skiplock.lock_event(j.tenant, event);
  SELECT s.result INTO recorded FROM skiplock.job_steps s WHERE s.job_id = j.id AND s.name = wait_for_event.name AND s.done;
  IF NOT FOUND THEN
    SELECT * INTO waiting FROM skiplock.event_waits w WHERE w.job_id = j.id AND w.step_name = wait_for_event.name;
    IF waiting.job_id IS NOT NULL AND waiting.timeout_at <= clock_timestamp() THEN
      recorded := 'null';
    ELSE
      SELECT jsonb_build_object('payload', e.payload, 'sentAt', skiplock.iso(e.sent_at)) INTO recorded
      FROM skiplock.events e
      WHERE e.tenant = j.tenant AND e.name = event AND (wait_for_event.key IS NULL OR e.key = wait_for_event.key)
        AND e.expires_at > now() AND e.sent_at >= j.created_at
      ORDER BY e.sent_at DESC
      LIMIT 1;
    END IF;
    IF recorded IS NOT NULL THEN
      INSERT INTO skiplock.job_steps (job_id, name, kind, done, result, attempt)
      VALUES (j.id, name, 'event', true, recorded, j.attempts);
    END IF;
  END IF;
  IF recorded IS NOT NULL THEN
    DELETE FROM skiplock.event_waits w WHERE w.job_id = j.id AND w.step_name = wait_for_event.name;
    UPDATE skiplock.jobs SET lease_expires_at = greatest(lease_expires_at, now() + make_interval(secs => wait_for_event.lease_seconds))
    WHERE id = j.id;
    RETURN skiplock.step_answer('done', recorded);
  END IF;
  IF j.cancel_requested_at IS NOT NULL THEN
    RETURN skiplock.step_answer('cancel-requested');
  END IF;
  INSERT INTO skiplock.event_waits (job_id, step_name, tenant, event, key, timeout_at)
  VALUES (j.id, name, j.tenant, event, key, timeout_at)
  ON CONFLICT ON CONSTRAINT event_waits_pkey DO NOTHING;
  PERFORM skiplock.park(j, coalesce(waiting.timeout_at, timeout_at),
                        jsonb_build_object('step', name, 'event', event, 'key', key));
  RETURN skiplock.step_answer('parked');
END
$$;

-- Sends an event to a tenant: one statement records it as the step result
-- of every job waiting for it and resumes them, and keeps it for `keep`
-- for jobs that reach their wait later (0 keeps nothing). Answers how many
-- jobs it woke.
--
--   SELECT skiplock.send_event('order.paid', '{"amount": 42}', tenant => 'acme', key => 'order-42');
CREATE FUNCTION skiplock.send_event(
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
    WHERE j.id = r.job_id AND j.state = 'scheduled'
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

-- ---------------------------------------------------------------------------
-- Child jobs and flows
-- ---------------------------------------------------------------------------

-- What a job waits for of other jobs: a child it invoked (ctx.step.invoke),
-- or a dependency of a flow. Kept after the other job ends (resolved_at),
-- as the graph's history.
CREATE TABLE skiplock.job_links (
  job_id      uuid        NOT NULL,
  other_id    uuid        NOT NULL,
  kind        text        NOT NULL,
  -- The invoke step a child's end is recorded as.
  step_name   text,
  -- A dependency that fails: fail the dependent ('fail') or run it anyway ('run').
  on_failure  text        NOT NULL DEFAULT 'fail',
  created_at  timestamptz NOT NULL DEFAULT now(),
  resolved_at timestamptz,
  PRIMARY KEY (job_id, other_id),
  CONSTRAINT job_links_kind_known CHECK (kind IN ('child', 'dependency')),
  CONSTRAINT job_links_on_failure_known CHECK (on_failure IN ('fail', 'run')),
  CONSTRAINT job_links_child_step CHECK ((kind = 'child') = (step_name IS NOT NULL))
);
CREATE INDEX job_links_other_idx ON skiplock.job_links (other_id) WHERE resolved_at IS NULL;
CREATE INDEX job_links_parent_idx ON skiplock.job_links (job_id);

-- ctx.step.invoke, for the invokes a handler made at once (Promise.all):
-- each child's end when it came, else each child enqueued (the first time,
-- in the parent's tenant) and the parent parked until all have ended.
-- `invokes` is [{"name", "child"}], child being enqueue_jobs' input.
CREATE FUNCTION skiplock.invoke_children(job_id uuid, lease_token uuid, invokes jsonb, lease_seconds integer)
RETURNS json
LANGUAGE plpgsql AS $$
DECLARE
  j skiplock.jobs := skiplock.owned_job(job_id, lease_token);
  invoke jsonb;
  recorded jsonb;
  ended jsonb := '{}';
  children jsonb := '{}';
  child_id uuid;
BEGIN
  IF j.id IS NULL THEN
    RETURN skiplock.step_answer('lease-lost');
  END IF;
  FOR invoke IN SELECT * FROM jsonb_array_elements(invokes) LOOP
    SELECT s.result INTO recorded FROM skiplock.job_steps s
    WHERE s.job_id = j.id AND s.name = invoke->>'name' AND s.done;
    IF FOUND THEN
      ended := ended || jsonb_build_object(invoke->>'name', recorded);
    ELSE
      children := children || jsonb_build_object(invoke->>'name', invoke->'child');
    END IF;
  END LOOP;
  IF children = '{}' THEN
    UPDATE skiplock.jobs SET lease_expires_at = greatest(lease_expires_at, now() + make_interval(secs => invoke_children.lease_seconds))
    WHERE id = j.id;
    RETURN skiplock.step_answer('done', ended);
  END IF;
  IF j.cancel_requested_at IS NOT NULL THEN
    RETURN skiplock.step_answer('cancel-requested');
  END IF;
  FOR invoke IN SELECT jsonb_build_object('name', e.key, 'child', e.value) FROM jsonb_each(children) e LOOP
    IF NOT EXISTS (SELECT 1 FROM skiplock.job_links l
                   WHERE l.job_id = j.id AND l.kind = 'child' AND l.step_name = invoke->>'name') THEN
      SELECT coalesce(e.id, e."heldBy") INTO child_id
      FROM skiplock.enqueue_jobs(jsonb_build_array(invoke->'child' || jsonb_build_object('tenant', j.tenant))) e;
      INSERT INTO skiplock.job_links (job_id, other_id, kind, step_name) VALUES (j.id, child_id, 'child', invoke->>'name');
    END IF;
  END LOOP;
  PERFORM skiplock.park(j, skiplock.until_woken(),
                        jsonb_build_object('steps', (SELECT jsonb_agg(e.key) FROM jsonb_each(children) e)));
  RETURN skiplock.step_answer('parked');
END
$$;

-- A flow: jobs enqueued in one statement, each parked until the jobs it
-- depends on have ended. `jobs` is enqueue_jobs' input (in order);
-- `dependencies` pairs their positions ({"job", "dependsOn", "onFailure"}),
-- checked for cycles and unknown jobs by the engine before it sends them.
CREATE FUNCTION skiplock.enqueue_flow(jobs jsonb, dependencies jsonb)
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
  INSERT INTO skiplock.job_links (job_id, other_id, kind, on_failure)
  SELECT ids[(d->>'job')::integer + 1], ids[(d->>'dependsOn')::integer + 1], 'dependency',
         coalesce(d->>'onFailure', 'fail')
  FROM jsonb_array_elements(dependencies) d;
  RETURN QUERY SELECT skiplock.job_json(j) FROM skiplock.jobs j WHERE j.id = ANY (ids) ORDER BY j.id;
END
$$;

-- When jobs end: a child's end becomes its parent's invoke step and resumes
-- the parent; a dependency's end resumes a dependent whose dependencies
-- have all ended, or fails it when one it must not run without failed; a
-- cancelled job's waiting children are cancelled; event waits of jobs that
-- ended are dropped. Statement-level, so a completion of many jobs pays a
-- probe per job when no job waits on them. The planner's defaults are set
-- back: complete_jobs turns nested loops off for its own statement, and
-- with them off each join below would read every event wait and every
-- unresolved link, in every completion.
CREATE FUNCTION skiplock.on_linked_jobs_finished() RETURNS trigger
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
      AND j.state = 'scheduled'
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

CREATE TRIGGER finished_jobs_resolve_links
  AFTER INSERT ON skiplock.finished_jobs
  REFERENCING NEW TABLE AS finished
  FOR EACH STATEMENT
  EXECUTE FUNCTION skiplock.on_linked_jobs_finished();

-- Each job's links as SQL shows them: what it waits for (or waited for) and what waits for it.
CREATE VIEW skiplock.job_graph AS
SELECT l.job_id, l.other_id, l.kind, l.step_name, l.on_failure, l.created_at, l.resolved_at,
       o.type AS other_type, o.state AS other_state
FROM skiplock.job_links l
LEFT JOIN skiplock.all_jobs o ON o.id = l.other_id;
