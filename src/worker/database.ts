import { deferredDb, deferredSessionDb } from '../db/deferred.js';
import type { Db, SessionDb } from '../db/types.js';
import { ConnectionGate } from '../drain/connection-gate.js';
import type { SubrequestBudget } from '../drain/subrequest-budget.js';
import type { DatabaseSource } from './settings.js';

/** node-postgres, loaded only where a Hyperdrive binding asks for it. */
const loadPg = () => import('../db/pg.js');

/**
 * The Neon driver, loaded by the first statement rather than while the
 * Worker starts: its module code (the bundled node-postgres' type parsers
 * among it) costs startup CPU.
 */
async function loadNeon(source: DatabaseSource & { kind: 'neon' }) {
  const neon = await import('./neon.js');
  neon.configureNeon(source);
  return neon;
}

/**
 * Single statements and batches for a request: Neon's HTTP driver (one
 * subrequest each), or over Hyperdrive a connection per statement. Nothing to close.
 */
export function requestDatabase(source: DatabaseSource): Db {
  if (source.kind === 'hyperdrive') {
    return deferredDb(async () => (await loadPg()).pgConnectionPerStatementDb(source.connectionString));
  }
  return deferredDb(async () => (await loadNeon(source)).neonHttpDb(source.url));
}

/**
 * Interactive transactions: Neon's WebSocket Pool, or node-postgres over
 * Hyperdrive. Workers forbid reusing a socket across invocations, so the
 * caller closes it before the event ends.
 */
export function sessionDatabase(source: DatabaseSource): SessionDb {
  if (source.kind === 'hyperdrive')
    return deferredSessionDb(async () => (await loadPg()).pgDb(source.connectionString, { max: 1 }));
  return deferredSessionDb(async () => (await loadNeon(source)).neonPoolDb(source.url));
}

/** Connections a Worker invocation may hold open at once (fetches, sockets, Neon HTTP statements). */
const WORKER_CONNECTIONS = 6;
/** Over Hyperdrive the drain's statements share a pool this size; its jobs' fetches get the other connections. */
const HYPERDRIVE_POOL = 2;

/**
 * A drain's statements and the connections its jobs share with them. Over
 * Neon HTTP every statement is a fetch: it counts a subrequest of
 * `subrequests` and holds one of the invocation's 6 connections while it
 * runs. Over Hyperdrive the statements use a pool of 2 connections (each a
 * subrequest), and jobs get the rest. The caller closes the database when the drain ends.
 */
export function drainDatabase(
  source: DatabaseSource,
  subrequests: SubrequestBudget,
): { db: Db; connections: ConnectionGate } {
  if (source.kind === 'hyperdrive') {
    subrequests.countUnseen(HYPERDRIVE_POOL);
    return {
      db: deferredDb(async () => (await loadPg()).pgDb(source.connectionString, { max: HYPERDRIVE_POOL })),
      // The gate keeps one connection for statements, which here go to the pool instead: jobs get the other four.
      connections: new ConnectionGate(WORKER_CONNECTIONS - HYPERDRIVE_POOL + 1),
    };
  }
  const connections = new ConnectionGate(WORKER_CONNECTIONS);
  const db = deferredDb(async () => (await loadNeon(source)).neonHttpDb(source.url));
  return { db: connections.statements(subrequests.countStatements(db)), connections };
}
