-- Live jobs' tags beside the jobs, in skiplock.job_tags, rather than in a
-- column of skiplock.jobs (0011): a claim rewrites its job's row, and tags
-- made every tagged row, so every claim of one, wider (bench/tags.ts;
-- docs/operations.md has the figures). As with the trace contexts (0013),
-- only a tagged job has a row, written in the statement that enqueues it.
-- A job's end takes its tags out with it, into finished_jobs.tags, which
-- stays as 0011 made it; a requeue puts them back. Reads see no change:
-- skiplock.all_jobs and skiplock.job_json give a live job's tags as before.

CREATE TABLE skiplock.job_tags (
  job_id uuid PRIMARY KEY,
  -- Null, never empty, stands for no tags (0011): an untagged job has no row.
  tags   text[] NOT NULL CONSTRAINT job_tags_some CHECK (cardinality(tags) > 0)
);

INSERT INTO skiplock.job_tags (job_id, tags) SELECT j.id, j.tags FROM skiplock.jobs j WHERE j.tags IS NOT NULL;

-- 0011's view, with a live job's tags from their table: a probe of its key
-- for each live job read.
CREATE OR REPLACE VIEW skiplock.all_jobs AS
SELECT j.id, j.queue, j.type, j.tenant, j.state, j.priority, j.run_at, j.attempts, j.max_attempts, j.lease_seconds,
       j.backoff_base_seconds, j.backoff_max_seconds, j.expires_at, j.dedup_key, j.dedup_window_seconds,
       j.created_at, j.first_started_at, j.started_at, j.worker_id, j.lease_token, j.lease_expires_at,
       j.cancel_requested_at, j.payload, j.progress, j.last_error, j.callback_url, j.failure_callback_url, j.run_ms,
       NULL::timestamptz AS finished_at, NULL::jsonb AS result, t.tags
FROM skiplock.jobs j LEFT JOIN skiplock.job_tags t ON t.job_id = j.id
UNION ALL
SELECT f.* FROM skiplock.finished_jobs f;

ALTER TABLE skiplock.jobs DROP COLUMN tags;

-- A live row and its tags as one job. Given apart for a statement that
-- writes the tags, which cannot read them back in itself (a retry's).
CREATE FUNCTION skiplock.job_json(j skiplock.jobs, tags text[]) RETURNS json
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT skiplock.job_json(ROW(
    j.id, j.queue, j.type, j.tenant, j.state, j.priority, j.run_at, j.attempts, j.max_attempts, j.lease_seconds,
    j.backoff_base_seconds, j.backoff_max_seconds, j.expires_at, j.dedup_key, j.dedup_window_seconds,
    j.created_at, j.first_started_at, j.started_at, j.worker_id, j.lease_token, j.lease_expires_at,
    j.cancel_requested_at, j.payload, j.progress, j.last_error, j.callback_url, j.failure_callback_url, j.run_ms,
    NULL, NULL, tags)::skiplock.all_jobs)
$$;

-- 0011's job_json of a live row, its tags read by the job's key.
CREATE OR REPLACE FUNCTION skiplock.job_json(j skiplock.jobs) RETURNS json
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT skiplock.job_json(j, (SELECT t.tags FROM skiplock.job_tags t WHERE t.job_id = j.id))
$$;

-- 0011's as_finished, taking the job's tags out of skiplock.job_tags: each
-- statement that ends jobs with it deletes them, so the tags go with them.
-- Called once a job, in the RETURNING of the delete that ends it.
CREATE OR REPLACE FUNCTION skiplock.as_finished(
  j skiplock.jobs, outcome text, outcome_result jsonb, error jsonb, held_ms double precision DEFAULT NULL)
RETURNS skiplock.finished_jobs
LANGUAGE sql VOLATILE AS $$
  WITH untagged AS (
    DELETE FROM skiplock.job_tags t WHERE t.job_id = j.id RETURNING t.tags
  )
  SELECT ROW(
    j.id, j.queue, j.type, j.tenant, outcome, j.priority, j.run_at, j.attempts, j.max_attempts,
    j.lease_seconds, j.backoff_base_seconds, j.backoff_max_seconds, j.expires_at, j.dedup_key,
    j.dedup_window_seconds, j.created_at, j.first_started_at,
    CASE WHEN held_ms IS NULL THEN j.started_at ELSE skiplock.handler_started_at(j.started_at, held_ms) END,
    j.worker_id, NULL, NULL, j.cancel_requested_at, j.payload, j.progress, coalesce(error, j.last_error),
    j.callback_url, j.failure_callback_url,
    j.run_ms + CASE WHEN held_ms IS NULL THEN 0
                    ELSE skiplock.ms_between(skiplock.handler_started_at(j.started_at, held_ms), clock_timestamp()) END,
    clock_timestamp(), outcome_result, (SELECT u.tags FROM untagged u))::skiplock.finished_jobs
$$;

-- 0011's complete_jobs, taking the tags out of skiplock.job_tags.
CREATE OR REPLACE FUNCTION skiplock.complete_jobs(
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
  -- The tags of the jobs it ended, taken out with them: a probe of the tag
  -- table's key for each id given, hashed against the jobs ended.
  untagged AS (
    DELETE FROM skiplock.job_tags t
    WHERE t.job_id = ANY (ids) AND t.job_id IN (SELECT done.id FROM done)
    RETURNING t.job_id, t.tags
  ),
  finished AS (
    INSERT INTO skiplock.finished_jobs
    SELECT done.id, done.queue, done.type, done.tenant, done.state, done.priority, done.run_at, done.attempts,
           done.max_attempts, done.lease_seconds, done.backoff_base_seconds, done.backoff_max_seconds,
           done.expires_at, done.dedup_key, done.dedup_window_seconds, done.created_at, done.first_started_at,
           done.started_at, done.worker_id, done.lease_token, done.lease_expires_at, done.cancel_requested_at,
           done.payload, done.progress, done.last_error, done.callback_url, done.failure_callback_url,
           done.run_ms, done.finished_at, done.result, untagged.tags
    FROM done LEFT JOIN untagged ON untagged.job_id = done.id
    -- Only when asked (a single completion): building the job costs as much as moving it.
    RETURNING finished_jobs.id, CASE WHEN with_jobs THEN skiplock.job_json(finished_jobs) END AS job
  )
  SELECT done.id, done.completed_by,
         CASE WHEN with_jobs THEN (SELECT finished.job FROM finished WHERE finished.id = done.id) END
  FROM done;
END
$$;

-- 0011's enqueue_jobs, writing the tags of the jobs it writes to skiplock.job_tags.
CREATE OR REPLACE FUNCTION skiplock.enqueue_jobs(jobs jsonb)
RETURNS SETOF skiplock.enqueue_answer
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
  one jsonb;
BEGIN
  IF NOT jobs @? '$[*] ? (@.dedupKey != null || @.concurrencyKey != null || @.orderingKey != null || @.rateKey != null
                          || @.debounceKey != null || @.debouncePeriodSeconds != null
                          || @.debounceMaxDelaySeconds != null || @.dedupOnConflict != null || @.dedupScope != null)' THEN
    -- Ids ascend in input order, so they put the results back in it.
    RETURN QUERY
    WITH input AS MATERIALIZED (SELECT * FROM skiplock.enqueue_rows(jobs)),
    written AS (
      INSERT INTO skiplock.jobs AS j
        (id, queue, type, tenant, payload, priority, state, run_at, max_attempts, lease_seconds,
         backoff_base_seconds, backoff_max_seconds, expires_at, dedup_key, dedup_window_seconds,
         callback_url, failure_callback_url)
      SELECT i.id, i.queue, i.type, i.tenant, i.payload, i.priority,
             CASE WHEN i.run_at > now() THEN 'scheduled' ELSE 'queued' END,
             i.run_at, i.max_attempts, i.lease_seconds, i.backoff_base_seconds, i.backoff_max_seconds,
             i.expires_at, i.dedup_key, i.dedup_window_seconds, i.callback_url, i.failure_callback_url
      FROM input i
      RETURNING skiplock.enqueued_job(j) AS job
    ),
    -- Every job of this path is written.
    tagged AS (
      INSERT INTO skiplock.job_tags (job_id, tags) SELECT i.id, i.tags FROM input i WHERE i.tags IS NOT NULL
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
  -- The tags of the jobs written (a deduplicated input writes none).
  tagged AS (
    INSERT INTO skiplock.job_tags (job_id, tags)
    SELECT i.id, i.tags FROM input i WHERE i.tags IS NOT NULL AND i.id IN (SELECT (w.job).id FROM written w)
  ),
  -- Settled by jobs_inserted_take_key_slots at the end of this statement.
  keyed AS (
    INSERT INTO skiplock.keyed_jobs (job_id, tenant, key, ordered, slots, on_failure, rate_limit, rate_seconds, rate_mode)
    SELECT i.id, i.tenant, coalesce(e.job->>'orderingKey', e.job->>'concurrencyKey', e.job->>'rateKey'),
           e.job ? 'orderingKey',
           CASE WHEN e.job ? 'orderingKey' THEN 1 WHEN e.job ? 'rateKey' THEN NULL
                ELSE coalesce((e.job->>'concurrencyLimit')::integer, 1) END,
           coalesce(e.job->>'orderingOnFailure', CASE WHEN e.job ? 'orderingKey' THEN 'hold' ELSE 'continue' END),
           (e.job->>'rateLimit')::integer, (e.job->>'ratePeriodSeconds')::integer,
           CASE WHEN e.job ? 'rateKey' THEN coalesce(e.job->>'rateOnExcess', 'throttle') END
    FROM input i
    JOIN jsonb_array_elements(jobs) WITH ORDINALITY AS e(job, ordinal) ON e.ordinal = i.ordinal
    WHERE coalesce(e.job->>'orderingKey', e.job->>'concurrencyKey', e.job->>'rateKey') IS NOT NULL
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

-- 0011's enqueue, writing the job's tags to skiplock.job_tags.
CREATE OR REPLACE FUNCTION skiplock.enqueue(
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
  debounce_max_delay_seconds integer     DEFAULT NULL,
  rate_key                   text        DEFAULT NULL,
  rate_limit                 integer     DEFAULT NULL,
  rate_period_seconds        integer     DEFAULT NULL,
  rate_on_excess             text        DEFAULT NULL,
  tags                       text[]      DEFAULT NULL)
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
  ELSIF (concurrency_key IS NOT NULL)::integer + (ordering_key IS NOT NULL)::integer + (rate_key IS NOT NULL)::integer > 1 THEN
    PERFORM skiplock.refuse(CASE WHEN rate_key IS NOT NULL THEN 'rate_key' ELSE 'ordering_key' END,
                            'give one of concurrency_key, ordering_key and rate_key');
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
  ELSIF length(rate_key) NOT BETWEEN 1 AND 256 THEN
    PERFORM skiplock.refuse('rate_key', 'a key of 1 to 256 characters, or null');
  ELSIF rate_key IS NOT NULL AND (rate_limit IS NULL OR rate_period_seconds IS NULL) THEN
    PERFORM skiplock.refuse('rate_limit', 'a rate_key needs rate_limit and rate_period_seconds');
  ELSIF rate_limit NOT BETWEEN 1 AND 10000 OR (rate_limit IS NOT NULL AND rate_key IS NULL) THEN
    PERFORM skiplock.refuse('rate_limit', format('from 1 to 10000, with a rate_key, not %s', rate_limit));
  ELSIF rate_period_seconds NOT BETWEEN 1 AND 86400 OR (rate_period_seconds IS NOT NULL AND rate_key IS NULL) THEN
    PERFORM skiplock.refuse('rate_period_seconds',
      format('from 1 to 86400 seconds, with a rate_key, not %s', rate_period_seconds));
  ELSIF rate_on_excess NOT IN ('throttle', 'drop') OR (rate_on_excess IS NOT NULL AND rate_key IS NULL) THEN
    PERFORM skiplock.refuse('rate_on_excess', format('throttle or drop, with a rate_key, not %s', rate_on_excess));
  ELSIF cardinality(tags) > 16 THEN
    PERFORM skiplock.refuse('tags', format('at most 16 tags, not %s', cardinality(tags)));
  ELSIF EXISTS (SELECT 1 FROM unnest(tags) t WHERE t IS NULL OR NOT skiplock.is_tag(t)) THEN
    PERFORM skiplock.refuse('tags', format('a tag is 1 to 64 of A-Z a-z 0-9 _ . : / = -, starting with a letter or digit, not %s',
      (SELECT coalesce(left(t, 100), 'null') FROM unnest(tags) t WHERE t IS NULL OR NOT skiplock.is_tag(t) LIMIT 1)));
  END IF;
  start_at := coalesce(run_at, now() + coalesce(delay, interval '0'));
  -- Each tag once, in the order given; none as null.
  tags := nullif(ARRAY(SELECT u.t FROM unnest(tags) WITH ORDINALITY AS u(t, n) GROUP BY u.t ORDER BY min(u.n)), '{}');
  IF coalesce(dedup_on_conflict, dedup_scope, debounce_key) IS NOT NULL THEN
    SELECT e.id, e."heldJob" INTO new_id, enqueued
    -- Without the nulls (stripped before the payload goes in, which may hold some).
    FROM skiplock.enqueue_singleton(jsonb_strip_nulls(jsonb_build_object(
      'queue', queue, 'tenant', tenant, 'type', type, 'priority', priority,
      'runAt', CASE WHEN run_at IS NOT NULL OR delay IS NOT NULL THEN start_at END, 'maxAttempts', max_attempts,
      'leaseSeconds', lease_seconds, 'expiresAt', expires_at, 'dedupKey', dedup_key,
      'dedupWindowSeconds', dedup_window_seconds, 'backoffBaseSeconds', backoff_base_seconds,
      'backoffMaxSeconds', backoff_max_seconds, 'callbackUrl', callback_url, 'failureCallbackUrl', failure_callback_url,
      'concurrencyKey', concurrency_key, 'concurrencyLimit', concurrency_limit, 'orderingKey', ordering_key,
      'orderingOnFailure', ordering_on_failure, 'rateKey', rate_key, 'rateLimit', rate_limit,
      'ratePeriodSeconds', rate_period_seconds, 'rateOnExcess', rate_on_excess, 'dedupOnConflict', dedup_on_conflict,
      'dedupScope', dedup_scope, 'debounceKey', debounce_key, 'debouncePeriodSeconds', debounce_period_seconds,
      'debounceMaxDelaySeconds', debounce_max_delay_seconds, 'tags', tags))
      || jsonb_build_object('payload', coalesce(payload, 'null'))) e;
    IF enqueued IS NULL THEN
      -- A new job, read after the insert trigger has settled its turn (a
      -- dropped one is in the history already).
      SELECT skiplock.job_json(a) INTO enqueued FROM skiplock.all_jobs a WHERE a.id = new_id;
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
      IF coalesce(concurrency_key, ordering_key, rate_key) IS NOT NULL THEN
        INSERT INTO skiplock.keyed_jobs (job_id, tenant, key, ordered, slots, on_failure, rate_limit, rate_seconds, rate_mode)
        VALUES (new_id, tenant, coalesce(ordering_key, concurrency_key, rate_key), ordering_key IS NOT NULL,
                CASE WHEN ordering_key IS NOT NULL THEN 1 WHEN rate_key IS NOT NULL THEN NULL
                     ELSE coalesce(concurrency_limit, 1) END,
                coalesce(ordering_on_failure, CASE WHEN ordering_key IS NOT NULL THEN 'hold' ELSE 'continue' END),
                rate_limit, rate_period_seconds, CASE WHEN rate_key IS NOT NULL THEN coalesce(rate_on_excess, 'throttle') END);
      END IF;
      -- Before the job: its insert trigger may end it at once (a rate key's
      -- drop), and the end takes the tags along.
      IF tags IS NOT NULL THEN
        INSERT INTO skiplock.job_tags (job_id, tags) VALUES (new_id, tags);
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
      -- Read after the insert trigger has settled the job's turn (a dropped
      -- job is in the history already).
      SELECT skiplock.job_json(a) INTO enqueued FROM skiplock.all_jobs a WHERE a.id = new_id;
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

-- 0014's requeued_job, putting the job's tags back in skiplock.job_tags as
-- it builds the live row (so VOLATILE): every requeue goes through it. Over
-- a row left by a job deleted from skiplock.jobs by hand, which took no tags out.
CREATE OR REPLACE FUNCTION skiplock.requeued_job(finished skiplock.finished_jobs, into_queue text)
RETURNS skiplock.jobs
LANGUAGE sql VOLATILE AS $$
  WITH tagged AS (
    INSERT INTO skiplock.job_tags (job_id, tags)
    SELECT finished.id, finished.tags WHERE finished.tags IS NOT NULL
    ON CONFLICT (job_id) DO UPDATE SET tags = EXCLUDED.tags
  )
  -- Queued now, with a fresh set of attempts, no lease and no expiry; what
  -- the job did before (its first start, progress, last error, run time)
  -- stays for its history.
  SELECT finished.id, into_queue::skiplock.short_name, finished.type, finished.tenant, 'queued',
         finished.priority, now(), 0::skiplock.attempt_count, finished.max_attempts, finished.lease_seconds,
         finished.backoff_base_seconds, finished.backoff_max_seconds, NULL::timestamptz, finished.dedup_key,
         finished.dedup_window_seconds, finished.created_at, finished.first_started_at, finished.started_at,
         NULL::text, NULL::uuid, NULL::timestamptz, NULL::timestamptz, finished.payload, finished.progress,
         finished.last_error, finished.callback_url, finished.failure_callback_url, finished.run_ms
$$;
