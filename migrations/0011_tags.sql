-- Tags and search: a job carries up to 16 tags (given at enqueue or by its
-- definition), kept as it moves to the history and back; the job list and
-- bulk actions filter by tags, by a payload match (jsonb containment) and,
-- for finished jobs, by the last error's text.
--
-- Indexes on the history only. skiplock.jobs keeps the indexes claiming,
-- counting and reaping need and no more (0001): a claim rewrites its row
-- outside HOT (state is in the claim index's predicate), so every index of
-- the live table takes an entry per claim, and a GIN index there (tags, even
-- partial on tagged jobs, or payloads) cost the enqueue and the drain more
-- than the 5% allowed (bench/tags.ts; docs/operations.md has the figures).
-- A search of the live table reads it newest first and stops at a page;
-- the history, which holds days of jobs, is where an index pays. Null,
-- never an empty array, for an untagged job, so the partial tag index
-- skips it.

ALTER TABLE skiplock.jobs ADD COLUMN tags text[];
ALTER TABLE skiplock.finished_jobs ADD COLUMN tags text[];

-- What a tag may be: 1 to 64 characters of A-Z a-z 0-9 _ . : / = -,
-- starting with a letter or digit (so `env=prod`, `customer:42`, `v1.2`).
CREATE FUNCTION skiplock.is_tag(tag text) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT tag ~ '^[A-Za-z0-9][A-Za-z0-9_.:/=-]{0,63}$'
$$;

CREATE INDEX finished_jobs_tags_idx ON skiplock.finished_jobs USING gin (tags) WHERE tags IS NOT NULL;
CREATE INDEX finished_jobs_payload_idx ON skiplock.finished_jobs USING gin (payload jsonb_path_ops);

-- New columns go last, so the view keeps its columns and adds tags.
CREATE OR REPLACE VIEW skiplock.all_jobs AS
SELECT j.id, j.queue, j.type, j.tenant, j.state, j.priority, j.run_at, j.attempts, j.max_attempts, j.lease_seconds,
       j.backoff_base_seconds, j.backoff_max_seconds, j.expires_at, j.dedup_key, j.dedup_window_seconds,
       j.created_at, j.first_started_at, j.started_at, j.worker_id, j.lease_token, j.lease_expires_at,
       j.cancel_requested_at, j.payload, j.progress, j.last_error, j.callback_url, j.failure_callback_url, j.run_ms,
       NULL::timestamptz AS finished_at, NULL::jsonb AS result, j.tags
FROM skiplock.jobs j
UNION ALL
SELECT f.* FROM skiplock.finished_jobs f;

ALTER TYPE skiplock.job_shape ADD ATTRIBUTE tags text[];

CREATE OR REPLACE FUNCTION skiplock.job_json(j skiplock.all_jobs) RETURNS json
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT row_to_json(ROW(
    j.id, j.queue, j.type, j.tenant, skiplock.job_status(j.state, j.run_at), j.priority,
    j.payload, j.attempts, j.max_attempts, j.lease_seconds, j.run_at, j.expires_at, j.dedup_key,
    j.created_at, j.first_started_at, j.started_at, j.finished_at,
    (extract(epoch FROM j.finished_at - j.started_at) * 1000)::bigint,
    j.lease_expires_at, j.worker_id, j.cancel_requested_at IS NOT NULL,
    j.progress, j.result, j.last_error, j.callback_url, j.failure_callback_url, j.run_ms,
    coalesce(j.tags, '{}'))::skiplock.job_shape)
$$;

-- A live row names its columns: tags come after all_jobs' finished_at and result.
CREATE OR REPLACE FUNCTION skiplock.job_json(j skiplock.jobs) RETURNS json
LANGUAGE sql STABLE PARALLEL SAFE AS $$
  SELECT skiplock.job_json(ROW(
    j.id, j.queue, j.type, j.tenant, j.state, j.priority, j.run_at, j.attempts, j.max_attempts, j.lease_seconds,
    j.backoff_base_seconds, j.backoff_max_seconds, j.expires_at, j.dedup_key, j.dedup_window_seconds,
    j.created_at, j.first_started_at, j.started_at, j.worker_id, j.lease_token, j.lease_expires_at,
    j.cancel_requested_at, j.payload, j.progress, j.last_error, j.callback_url, j.failure_callback_url, j.run_ms,
    NULL, NULL, j.tags)::skiplock.all_jobs)
$$;

-- 0001's as_finished, carrying the tags.
CREATE OR REPLACE FUNCTION skiplock.as_finished(
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
    clock_timestamp(), outcome_result, j.tags)::skiplock.finished_jobs
$$;

-- 0001's complete_jobs, carrying the tags.
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
              clock_timestamp() AS finished_at, input.result, j.tags
  ),
  finished AS (
    INSERT INTO skiplock.finished_jobs
    SELECT done.id, done.queue, done.type, done.tenant, done.state, done.priority, done.run_at, done.attempts,
           done.max_attempts, done.lease_seconds, done.backoff_base_seconds, done.backoff_max_seconds,
           done.expires_at, done.dedup_key, done.dedup_window_seconds, done.created_at, done.first_started_at,
           done.started_at, done.worker_id, done.lease_token, done.lease_expires_at, done.cancel_requested_at,
           done.payload, done.progress, done.last_error, done.callback_url, done.failure_callback_url,
           done.run_ms, done.finished_at, done.result, done.tags
    FROM done
    -- Only when asked (a single completion): building the job costs as much as moving it.
    RETURNING finished_jobs.id, CASE WHEN with_jobs THEN skiplock.job_json(finished_jobs) END AS job
  )
  SELECT done.id, done.completed_by,
         CASE WHEN with_jobs THEN (SELECT finished.job FROM finished WHERE finished.id = done.id) END
  FROM done;
END
$$;

-- 0001's enqueue_rows, reading `tags` (a new column of its answer, so made again).
DROP FUNCTION skiplock.enqueue_rows(jsonb);
CREATE FUNCTION skiplock.enqueue_rows(jobs jsonb)
RETURNS TABLE (
  ordinal bigint, id uuid, queue text, type text, tenant text, payload jsonb, priority smallint,
  run_at timestamptz, max_attempts smallint, lease_seconds integer, backoff_base_seconds real,
  backoff_max_seconds real, expires_at timestamptz, dedup_key text, dedup_window_seconds integer,
  callback_url text, failure_callback_url text, tags text[])
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
         i.job->>'failureCallbackUrl' AS failure_callback_url,
         -- The engine sends them checked and each once; none as null.
         CASE WHEN jsonb_array_length(coalesce(i.job->'tags', '[]')) > 0
              THEN ARRAY(SELECT jsonb_array_elements_text(i.job->'tags')) END AS tags
  FROM jsonb_array_elements(jobs) WITH ORDINALITY AS i(job, ordinal)
  -- OFFSET 0 keeps the planner from copying clock_timestamp() (and the
  -- draw of the ids' seed) into every use of at.
  CROSS JOIN (SELECT clock_timestamp() AS at, uuid_send(gen_random_uuid()) AS seed OFFSET 0) clock;
END
$$;

-- 0008's enqueue_jobs, storing the tags.
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
    WITH written AS (
      INSERT INTO skiplock.jobs AS j
        (id, queue, type, tenant, payload, priority, state, run_at, max_attempts, lease_seconds,
         backoff_base_seconds, backoff_max_seconds, expires_at, dedup_key, dedup_window_seconds,
         callback_url, failure_callback_url, tags)
      SELECT i.id, i.queue, i.type, i.tenant, i.payload, i.priority,
             CASE WHEN i.run_at > now() THEN 'scheduled' ELSE 'queued' END,
             i.run_at, i.max_attempts, i.lease_seconds, i.backoff_base_seconds, i.backoff_max_seconds,
             i.expires_at, i.dedup_key, i.dedup_window_seconds, i.callback_url, i.failure_callback_url, i.tags
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
       callback_url, failure_callback_url, tags)
    SELECT id, queue, type, tenant, payload, priority,
           CASE WHEN run_at > now() THEN 'scheduled' ELSE 'queued' END,
           run_at, max_attempts, lease_seconds, backoff_base_seconds, backoff_max_seconds,
           expires_at, dedup_key, dedup_window_seconds, callback_url, failure_callback_url, tags
    FROM input
    WHERE dedup_key IS NULL OR id IN (SELECT job_id FROM keys)
    ORDER BY ordinal
    RETURNING skiplock.enqueued_job(j) AS job
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

-- 0008's enqueue with tags (each kept once, in the order given):
--
--   SELECT skiplock.enqueue('emails', '{"to": "a@example.com"}', tags => ARRAY['signup', 'env=prod'])->>'id';
DROP FUNCTION skiplock.enqueue(text, jsonb, text, text, integer, timestamptz, interval, integer, integer, timestamptz,
                               text, integer, real, real, text, text, text, integer, text, text, text, text, text,
                               integer, integer, text, integer, integer, text);
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
      INSERT INTO skiplock.jobs AS j
        (id, queue, type, tenant, payload, priority, state, run_at, max_attempts, lease_seconds,
         backoff_base_seconds, backoff_max_seconds, expires_at, dedup_key, dedup_window_seconds,
         callback_url, failure_callback_url, tags)
      VALUES (new_id, queue, coalesce(type, queue), tenant, coalesce(payload, 'null'), coalesce(priority, 0),
              CASE WHEN start_at > now() THEN 'scheduled' ELSE 'queued' END, start_at, coalesce(max_attempts, 5),
              coalesce(lease_seconds, 60), coalesce(backoff_base_seconds, 1), coalesce(backoff_max_seconds, 3600),
              expires_at, dedup_key, coalesce(dedup_window_seconds, 0), callback_url, failure_callback_url, tags)
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

-- 0001's insert through skiplock.all_jobs, passing the tags on.
CREATE OR REPLACE FUNCTION skiplock.enqueue_from_view() RETURNS trigger
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
    failure_callback_url => NEW.failure_callback_url, tags => NEW.tags);
  SELECT * INTO NEW FROM skiplock.all_jobs a WHERE a.id = (enqueued->>'id')::uuid;
  RETURN NEW;
END
$$;
