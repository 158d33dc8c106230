import { env } from 'cloudflare:workers';
import type { Db, SessionDb } from '../../../src/db/types';
import { builtInJobs } from '../../../src/drain/handlers/built-in';
import { createRegistry } from '../../../src/drain/registry';
import type { AppDeps } from '../../../src/http/context';
import { requestDatabase, sessionDatabase as sessionDatabaseOf } from '../../../src/worker/database';
import { workerDeliveries } from '../../../src/worker/deliveries';
import type { DrainRuntime } from '../../../src/worker/drain';
import type { SkiplockEnv } from '../../../src/worker/env';
import { resolveSettings, type DatabaseSource } from '../../../src/worker/settings';

type Vars = Partial<Cloudflare.Env> & SkiplockEnv;

/** The test env's database, through the local Neon proxy as the Worker reaches it. */
function neonSource(vars: Vars): DatabaseSource {
  return {
    kind: 'neon',
    url: vars.DATABASE_URL ?? env.DATABASE_URL,
    localProxy: vars.LOCAL_NEON_PROXY ?? env.LOCAL_NEON_PROXY,
  };
}

/** Neon's HTTP driver, as the Worker uses it for requests. */
export function httpDatabase(vars: Vars = env): Db {
  return requestDatabase(neonSource(vars));
}

/** Neon's WebSocket Pool, as the Worker uses it for interactive transactions. */
export function sessionDatabase(vars: Vars = env): SessionDb {
  return sessionDatabaseOf(neonSource(vars));
}

/** What the Worker factory resolves from these variables: its settings, the built-in jobs and the delivery targets. */
export function drainRuntime(vars: Vars = {}): DrainRuntime {
  const bindings = { ...env, ...vars };
  const settings = resolveSettings({}, bindings, { api: true });
  return {
    settings,
    registry: createRegistry(builtInJobs(settings.jobs)),
    deliveries: workerDeliveries(bindings, settings.jobs.http),
  };
}

/** The app's dependencies as the factory wires them for the test env, with some replaced. */
export function appDeps(overrides: Partial<AppDeps> = {}): AppDeps {
  const { settings, deliveries } = drainRuntime();
  return {
    settings: () => settings.api,
    database: () => httpDatabase(),
    sessionDatabase: () => sessionDatabase(),
    deliveryProblem: (_env, delivery) => deliveries.problemWith(delivery),
    ...overrides,
  };
}
