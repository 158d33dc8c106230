-- skiplock schema, version 8: dedup keys belong to a tenant.
--
-- The unique dedup index was on (queue, dedup_key), so one tenant's key
-- blocked another tenant's job with the same key in the same queue (a 409)
-- and told it that the key existed. Each tenant now has its own keys: the
-- index, and with it the enqueue's ON CONFLICT target and its match, take
-- (queue, tenant, dedup_key). Every pair the old index allowed is unique
-- under the new one too, so building it cannot fail on existing rows.
--
-- The enqueue of the version before names the old index's columns in its
-- ON CONFLICT: deploy the code of this version right after applying this.

CREATE UNIQUE INDEX jobs_tenant_dedup_idx ON skiplock.jobs (queue, tenant, dedup_key)
  WHERE dedup_key IS NOT NULL;
DROP INDEX skiplock.jobs_dedup_idx;
