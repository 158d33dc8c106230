import type { ApiKeyScope } from '../../engine/api-keys.js';
import type { TenantScope } from '../../engine/index.js';

/** A caller holding an API key (or the ADMIN_TOKEN, which acts as an admin key). */
export interface KeyHolder {
  kind: 'api-key';
  /** The key's id; null for the ADMIN_TOKEN. */
  keyId: string | null;
  scopes: readonly ApiKeyScope[];
  /** The only tenant this caller sees; null for every tenant. */
  tenant: string | null;
  /** The only worker id this caller claims under, and the one whose jobs it may hand back; null for none. */
  workerId: string | null;
}

/** A browser holding the signed status token of one job: it may read that job and nothing else. */
export interface StatusTokenHolder {
  kind: 'status-token';
  jobId: string;
}

export type Principal = KeyHolder | StatusTokenHolder;

/** `admin` may do everything a scope allows. */
export function hasScope(holder: KeyHolder, scopes: readonly ApiKeyScope[]): boolean {
  return holder.scopes.includes('admin') || scopes.some((scope) => holder.scopes.includes(scope));
}

/** The engine's tenant scope for this caller: a tenant-bound key reaches only its tenant. */
export function tenantScope(principal: Principal): TenantScope {
  return principal.kind === 'api-key' && principal.tenant !== null ? { tenant: principal.tenant } : {};
}

/** The key holder of a route that status tokens cannot open (their `access` rule says so). */
export function asKeyHolder(principal: Principal): KeyHolder {
  if (principal.kind !== 'api-key') throw new Error('a status token reached a route that only keys may call');
  return principal;
}
