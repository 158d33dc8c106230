-- skiplock 0003: an API key can be bound to one worker id.
--
-- POST /v1/workers/{workerId}/release hands back every job a worker holds
-- at once, for a worker that knows it crashed and starts again under the
-- same id. Any worker key could call it for any id, a live worker's
-- included, and then a second attempt of a job ran beside the first. Only a
-- key bound to that worker id may now: the worker that owns the id. A bound
-- key also claims only under its id.
ALTER TABLE skiplock.api_keys
  ADD COLUMN worker_id text,
  ADD CONSTRAINT api_keys_worker_id_length CHECK (length(worker_id) BETWEEN 1 AND 128),
  -- A worker binding is for a worker key; an admin key reaches everything, so a binding would restrict nothing.
  ADD CONSTRAINT api_keys_worker_bound_worker
    CHECK (worker_id IS NULL OR ('worker' = ANY (scopes) AND NOT 'admin' = ANY (scopes)));
