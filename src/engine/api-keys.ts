import type { Queryable } from '../db/types.js';

/** What a key may do; the same list as the api_keys_scopes_known constraint. */
export const API_KEY_SCOPES = ['admin', 'enqueue', 'read', 'worker', 'events', 'operator'] as const;
export type ApiKeyScope = (typeof API_KEY_SCOPES)[number];

/** A key as stored, without its secret (which is never stored) or the secret's hash. */
export interface ApiKey {
  id: string;
  name: string;
  scopes: ApiKeyScope[];
  /** The tenant the key is bound to; null for a key that reaches every tenant. */
  tenant: string | null;
  /**
   * The worker id the key is bound to: it claims only under that id, and it
   * alone may hand back everything that id holds (`releaseWorker`). Null for
   * a key that claims under any id and hands back nothing wholesale.
   */
  workerId: string | null;
  /** The first characters of the secret, to tell keys apart. */
  secretPrefix: string;
  createdAt: string;
  revokedAt: string | null;
}

export interface NewApiKey {
  name: string;
  scopes: readonly ApiKeyScope[];
  tenant?: string | null;
  workerId?: string | null;
  /** Lowercase hex SHA-256 of the secret; the secret itself never reaches the database. */
  secretSha256: string;
  secretPrefix: string;
}

/** A key's columns as an `ApiKey` names them. */
export const apiKeyColumns = /* sql */ `
  id, name, scopes, tenant, worker_id AS "workerId", secret_prefix AS "secretPrefix",
  skiplock.iso(created_at) AS "createdAt", skiplock.iso(revoked_at) AS "revokedAt"`;

const createApiKeySql = /* sql */ `
INSERT INTO skiplock.api_keys (name, scopes, tenant, worker_id, secret_sha256, secret_prefix)
VALUES ($1, $2::text[], $3, $4, $5, $6)
RETURNING ${apiKeyColumns}`;

const findActiveApiKeySql = /* sql */ `
SELECT ${apiKeyColumns} FROM skiplock.api_keys WHERE secret_sha256 = $1 AND revoked_at IS NULL`;

const listApiKeysSql = /* sql */ `
SELECT ${apiKeyColumns} FROM skiplock.api_keys ORDER BY created_at DESC, id DESC`;

/** Revoking twice keeps the first revocation time. */
const revokeApiKeySql = /* sql */ `
UPDATE skiplock.api_keys SET revoked_at = coalesce(revoked_at, now())
WHERE id = $1
RETURNING ${apiKeyColumns}`;

export async function createApiKey(db: Queryable, key: NewApiKey): Promise<ApiKey> {
  const [row] = await db.query<ApiKey>({
    name: 'skiplock_create_api_key',
    text: createApiKeySql,
    params: [key.name, key.scopes, key.tenant ?? null, key.workerId ?? null, key.secretSha256, key.secretPrefix],
  });
  return row!;
}

/** The unrevoked key whose secret hashes to `secretSha256`, if any. */
export async function findActiveApiKey(db: Queryable, secretSha256: string): Promise<ApiKey | undefined> {
  const [row] = await db.query<ApiKey>({
    name: 'skiplock_find_active_api_key',
    text: findActiveApiKeySql,
    params: [secretSha256],
  });
  return row;
}

/** Every key, revoked ones included, newest first. */
export async function listApiKeys(db: Queryable): Promise<ApiKey[]> {
  return db.query<ApiKey>({ name: 'skiplock_list_api_keys', text: listApiKeysSql, params: [] });
}

/** Revokes a key at once; undefined when no key has that id. */
export async function revokeApiKey(db: Queryable, id: string): Promise<ApiKey | undefined> {
  const [row] = await db.query<ApiKey>({
    name: 'skiplock_revoke_api_key',
    text: revokeApiKeySql,
    params: [id],
  });
  return row;
}
