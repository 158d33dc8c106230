-- Trace context (W3C Trace Context: the `traceparent` and `tracestate`
-- headers) given at enqueue, kept for the drain that runs the job, so its
-- attempts' spans join the trace of the request that enqueued it.
--
-- A table beside the jobs rather than a column of theirs: only jobs
-- enqueued with a context have a row, so an enqueue without one writes what
-- it wrote before, a claim that does not trace reads nothing more, and no
-- statement that moves jobs (finishing, retrying) changes. The enqueue adds
-- a job's row in the statement that inserts the job (src/engine/enqueue.ts);
-- housekeeping deletes the rows of jobs no longer live
-- (skiplock.prune_trace_contexts), so a finished job's history does not keep its context.
CREATE TABLE skiplock.job_trace_contexts (
  job_id      uuid PRIMARY KEY,
  -- Version 00, the only one defined: trace id, parent (span) id, flags;
  -- neither id all zeros. The engine refuses anything else before it gets here.
  traceparent text NOT NULL CONSTRAINT job_trace_contexts_traceparent_w3c CHECK (
    traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
    AND substr(traceparent, 4, 32) <> repeat('0', 32)
    AND substr(traceparent, 37, 16) <> repeat('0', 16)),
  -- Vendors' entries; W3C asks propagators to keep at least 512 characters.
  tracestate  text CONSTRAINT job_trace_contexts_tracestate_length CHECK (length(tracestate) <= 512)
);

-- The rows of jobs that are no longer live, in one bounded batch: a job
-- that finished (or was deleted) is not run again by the drain, except by a
-- retry, which starts a trace of its own. A live job's row stays however
-- long the job waits.
CREATE FUNCTION skiplock.prune_trace_contexts(batch integer) RETURNS integer
LANGUAGE sql AS $$
  WITH doomed AS (
    SELECT t.job_id FROM skiplock.job_trace_contexts t
    WHERE NOT EXISTS (SELECT 1 FROM skiplock.jobs j WHERE j.id = t.job_id)
    LIMIT batch
  ),
  pruned AS (
    DELETE FROM skiplock.job_trace_contexts t USING doomed WHERE t.job_id = doomed.job_id RETURNING 1
  )
  SELECT count(*)::integer FROM pruned
$$;
