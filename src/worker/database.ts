import { neonConfig } from '@neondatabase/serverless';
import { neonHttpDb } from '../db/neon-http.js';
import { neonPoolDb } from '../db/neon-ws.js';
import type { Db, SessionDb } from '../db/types.js';
import { applyLocalNeonConfig } from '../local/neon-config.js';
import type { Env } from './env.js';

function configureDriver(env: Env): void {
  if (env.LOCAL_NEON_PROXY) applyLocalNeonConfig(neonConfig, env.LOCAL_NEON_PROXY);
}

/** Single statements and batches: Neon's HTTP driver, one request each, nothing to close. */
export function httpDatabase(env: Env): Db {
  configureDriver(env);
  return neonHttpDb(env.DATABASE_URL);
}

/**
 * Interactive transactions: Neon's WebSocket Pool. Workers forbid reusing a
 * socket across invocations, so the caller closes it before the event ends.
 */
export function sessionDatabase(env: Env): SessionDb {
  configureDriver(env);
  return neonPoolDb(env.DATABASE_URL);
}
