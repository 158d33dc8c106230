import type { Queryable } from '../../db/types.js';
import { type ApiKey, findActiveApiKey } from '../../engine/api-keys.js';
import { looksLikeApiKey } from './api-key-secret.js';
import { sameSecret, sha256Hex } from './crypto.js';
import type { KeyHolder } from './principal.js';

const ADMIN_TOKEN_HOLDER: KeyHolder = { kind: 'api-key', keyId: null, scopes: ['admin'], tenant: null, workerId: null };

/**
 * Who holds this bearer token: the ADMIN_TOKEN (compared in constant time) or
 * an unrevoked API key. A key is looked up by the SHA-256 of the presented
 * secret, so the database compares hashes, never secrets, and timing reveals
 * nothing an attacker can steer. Undefined when the token is neither.
 */
export async function keyHolderFor(
  bearer: string,
  adminToken: string | undefined,
  database: () => Queryable,
): Promise<KeyHolder | undefined> {
  const admin = await adminTokenHolder(bearer, adminToken);
  if (admin !== undefined) return admin;
  if (!looksLikeApiKey(bearer)) return undefined;
  const key = await findActiveApiKey(database(), await sha256Hex(bearer));
  return key && apiKeyHolder(key);
}

/** The ADMIN_TOKEN's holder when the bearer token is the ADMIN_TOKEN (compared in constant time). */
export async function adminTokenHolder(bearer: string, adminToken: string | undefined): Promise<KeyHolder | undefined> {
  return adminToken && (await sameSecret(bearer, adminToken)) ? ADMIN_TOKEN_HOLDER : undefined;
}

/** The holder of an unrevoked key. */
export function apiKeyHolder(key: ApiKey): KeyHolder {
  return { kind: 'api-key', keyId: key.id, scopes: key.scopes, tenant: key.tenant, workerId: key.workerId };
}
