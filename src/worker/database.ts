import { neonConfig } from '@neondatabase/serverless';
import { neonHttpDb } from '../db/neon-http.js';
import { applyLocalNeonConfig } from '../db/neon-local.js';
import { neonPoolDb } from '../db/neon-ws.js';
import { deferredDb } from '../db/deferred.js';
import type { Db, SessionDb } from '../db/types.js';
import type { SubrequestBudget } from '../drain/subrequest-budget.js';
import type { DatabaseSource } from './settings.js';

/** node-postgres, loaded only where a Hyperdrive binding asks for it. */
const loadPg = () => import('../db/pg.js');

function configureNeon(source: DatabaseSource & { kind: 'neon' }): void {
  if (source.localProxy !== undefined) applyLocalNeonConfig(neonConfig, source.localProxy);
}

/**
 * Single statements and batches for a request: Neon's HTTP driver (one
 * subrequest each), or over Hyperdrive a connection per statement. Nothing to close.
 */
export function requestDatabase(source: DatabaseSource): Db {
  if (source.kind === 'hyperdrive') {
    return deferredDb(async () => (await loadPg()).pgConnectionPerStatementDb(source.connectionString));
  }
  configureNeon(source);
  return neonHttpDb(source.url);
}

/**
 * Interactive transactions: Neon's WebSocket Pool, or node-postgres over
 * Hyperdrive. Workers forbid reusing a socket across invocations, so the
 * caller closes it before the event ends.
 */
export function sessionDatabase(source: DatabaseSource): SessionDb {
  if (source.kind === 'hyperdrive') return deferredDb(async () => (await loadPg()).pgDb(source.connectionString, { max: 1 }));
  configureNeon(source);
  return neonPoolDb(source.url);
}

/**
 * A drain's statements: Neon HTTP, each one a subrequest of `subrequests`,
 * or over Hyperdrive a pool of at most `connections` (Workers allow 6 open
 * at once), each connection a subrequest. The caller closes it when the drain ends.
 */
export function drainDatabase(source: DatabaseSource, connections: number, subrequests: SubrequestBudget): Db {
  if (source.kind === 'hyperdrive') {
    const max = Math.min(connections, 5);
    subrequests.countUnseen(max);
    return deferredDb(async () => (await loadPg()).pgDb(source.connectionString, { max }));
  }
  configureNeon(source);
  return subrequests.countStatements(neonHttpDb(source.url));
}
