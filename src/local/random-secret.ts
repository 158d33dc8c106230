import { randomBytes } from 'node:crypto';

/**
 * 192 random bits as base64url: a secret of the local stack (the dev admin
 * key, the Postgres password, the Neon proxy's path), safe in a URL, a
 * connection string and a `.dev.vars` file as it is.
 */
export function randomSecret(): string {
  return randomBytes(24).toString('base64url');
}
