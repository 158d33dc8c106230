-- skiplock schema, version 2: API keys for the HTTP API.
--
-- Only the SHA-256 of a key's secret is stored: the secret is shown once, when
-- the key is made. A key is found by the hash of the secret a request presents,
-- so the database compares hashes, never secrets. Revoking keeps the row, so
-- the list of keys stays an audit trail.

CREATE TABLE skiplock.api_keys (
  id            uuid        PRIMARY KEY DEFAULT skiplock.uuid_v7(),
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
