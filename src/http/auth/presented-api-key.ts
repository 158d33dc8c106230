import type { ApiKey, ApiKeyScope } from '../../engine/api-keys.js';
import type { KeyHolder } from './principal.js';

/**
 * An API key a request presented to a route that checks it in its own
 * statement (`keyCheckedByStatement`), not yet looked up: the statement reads
 * the key's row, and `settle` answers for that row exactly as the `access`
 * middleware answers for the row it looks up.
 */
export interface PresentedApiKey {
  kind: 'presented-api-key';
  /** Lowercase hex SHA-256 of the presented secret: what the statement finds the key by. */
  secretSha256: string;
  /** The key needs one of these: the route's scopes and `admin`. */
  scopes: readonly ApiKeyScope[];
  /**
   * The holder of the key whose row the statement read (undefined: no
   * unrevoked key has this secret), made the request's principal: a 401
   * counted as a failed authentication when there is none, a 403 when it lacks the scope.
   */
  settle(key: ApiKey | undefined): Promise<KeyHolder>;
  /** Looks the key up in a statement of its own, then settles it: for when the route's statement cannot check it. */
  lookUp(): Promise<KeyHolder>;
  /** Whether the key was settled (so the request's principal is set). */
  readonly settled: boolean;
}
