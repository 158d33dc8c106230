import { neonConfig } from '@neondatabase/serverless';
import WebSocket from 'ws';
import { neonHttpDb } from '../../src/db/neon-http';
import { neonPoolDb } from '../../src/db/neon-ws';
import { pgDb } from '../../src/db/pg';
import type { Db } from '../../src/db/types';
import { applyLocalNeonConfig } from '../../src/db/neon-local';
import { startNeonProxy, type NeonProxy } from '../../src/local/neon-proxy';
import { postgresAddressOf } from './postgres-address';

/** The three drivers of src/db; the engine suite runs over each (River's driver test suite). */
export const DRIVERS = ['pg', 'neon-http', 'neon-ws'] as const;
export type DriverName = (typeof DRIVERS)[number];

let proxy: Promise<NeonProxy> | undefined;

/**
 * The Neon drivers reach the test Postgres through the local Neon proxy, as
 * they do under `npm start`. One proxy per test file, started on first use.
 */
async function neonProxyFor(databaseUrl: string): Promise<NeonProxy> {
  proxy ??= startConfiguredNeonProxy(databaseUrl);
  return proxy;
}

/** A Neon proxy in front of the database's server, with the Neon driver pointed at it (the fault tests cut its connections). */
export async function startConfiguredNeonProxy(databaseUrl: string): Promise<NeonProxy> {
  const started = await startNeonProxy({ postgres: postgresAddressOf(databaseUrl) });
  applyLocalNeonConfig(neonConfig, started.address);
  neonConfig.webSocketConstructor = WebSocket;
  return started;
}

export async function closeNeonProxy(): Promise<void> {
  const running = proxy;
  proxy = undefined;
  if (running) await (await running).close();
}

/** A Db of the named driver on the given database. `connections` caps the pool drivers. */
export async function connectDriver(driver: DriverName, databaseUrl: string, connections = 10): Promise<Db> {
  switch (driver) {
    case 'pg':
      return pgDb(databaseUrl, { max: connections });
    case 'neon-http':
      await neonProxyFor(databaseUrl);
      return neonHttpDb(databaseUrl);
    case 'neon-ws':
      await neonProxyFor(databaseUrl);
      return neonPoolDb(databaseUrl);
  }
}
