import { Pool } from '@neondatabase/serverless';
import { poolDb } from './pool.js';
import type { SessionDb } from './types.js';

/**
 * Neon over WebSocket: interactive transactions. On Workers a pool must be
 * created, used and closed inside one request or event (a pool kept at module
 * scope outlives its sockets), so callers make one per invocation and close it.
 */
export function neonPoolDb(connectionString: string): SessionDb {
  const pool = new Pool({ connectionString, max: 5 });
  pool.on('error', () => {});
  return poolDb(pool);
}
