-- Trace context that follows a job to the jobs it makes in the database
-- (0013 keeps the context an enqueue gives): an invoked child keeps the
-- context its parent's step sent with it, and a completion callback keeps
-- the context of the job it announces, so their attempts' spans join the
-- same trace. A job without a row in skiplock.job_trace_contexts makes
-- none: an untraced deployment writes what it wrote before. And a traced
-- claim reads the contexts of the jobs it took after taking them.

-- ctx.step.invoke, as 0004 made it, but a child sent with a `traceparent`
-- (the parent's attempt span, when the drain traces) keeps it, as
-- src/engine/enqueue.ts keeps an enqueue's.
CREATE OR REPLACE FUNCTION skiplock.invoke_children(job_id uuid, lease_token uuid, invokes jsonb, lease_seconds integer)
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
      IF invoke->'child' ? 'traceparent' THEN
        INSERT INTO skiplock.job_trace_contexts (job_id, traceparent, tracestate)
        VALUES (child_id, invoke->'child'->>'traceparent', invoke->'child'->>'tracestate')
        ON CONFLICT ON CONSTRAINT job_trace_contexts_pkey DO NOTHING;
      END IF;
    END IF;
  END LOOP;
  PERFORM skiplock.park(j, skiplock.until_woken(),
                        jsonb_build_object('steps', (SELECT jsonb_agg(e.key) FROM jsonb_each(children) e)));
  RETURN skiplock.step_answer('parked');
END
$$;

-- A completion callback, as 0001 made it, but the delivery job keeps the
-- trace context of the job it announces, if that job kept one: the
-- callback's attempts are spans of the job's trace, and its POST carries
-- their traceparent. One probe of the context's primary key per callback.
CREATE OR REPLACE FUNCTION skiplock.on_job_finished_with_callback() RETURNS trigger
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
  INSERT INTO skiplock.job_trace_contexts (job_id, traceparent, tracestate)
  SELECT delivery, t.traceparent, t.tracestate FROM skiplock.job_trace_contexts t WHERE t.job_id = NEW.id;
  INSERT INTO skiplock.job_events (job_id, kind, attempt, worker_id, detail)
  VALUES (NEW.id, 'callback_enqueued', NEW.attempts, NEW.worker_id,
          jsonb_build_object('callbackJobId', delivery, 'url', url, 'event', event));
  RETURN NULL;
END
$$;

-- The trace contexts of jobs a claim just took, for a claimer that traces
-- (src/engine/claim-batch.ts). VOLATILE, so it reads with a snapshot of its
-- own, taken after skiplock.claim_batch's statements: those can claim a job
-- committed after the calling statement began (a callback that a
-- completion enqueued a moment before), whose context a join in the
-- calling statement, reading with that statement's older snapshot, would miss.
CREATE FUNCTION skiplock.trace_contexts_of(job_ids uuid[])
RETURNS TABLE (job_id uuid, traceparent text, tracestate text)
LANGUAGE sql VOLATILE AS $$
  SELECT t.job_id, t.traceparent, t.tracestate FROM skiplock.job_trace_contexts t WHERE t.job_id = ANY (job_ids)
$$;
