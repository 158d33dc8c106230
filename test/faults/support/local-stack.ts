import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { projectRoot } from '../../support/repository-root';
import { startLocalWorker } from '../../../src/local/start/local-worker';
import { pgDb } from '../../../src/db/pg';
import { writeDevVarsFile } from '../../../src/local/dev-vars-file';
import { startEmbeddedPostgres, type LocalPostgres } from '../../../src/local/embedded-postgres';
import { startNeonProxy, type NeonProxy } from '../../../src/local/neon-proxy';
import { randomSecret } from '../../../src/local/random-secret';
import { anyFreePort, LOOPBACK } from '../../../src/local/ports';
import { startScheduledTrigger, type ScheduledTrigger } from '../../../src/local/scheduled-trigger';
import { loadMigrations } from '../../../src/migrate/load';
import { migrate } from '../../../src/migrate/runner';

/**
 * A Postgres of this scenario's own (embedded, in a temporary folder), so
 * stopping it disturbs no other test and never the system one. Its data
 * survives a restart; `remove()` stops it and deletes the folder.
 */
export interface RestartablePostgres {
  url: string;
  port: number;
  stop(): Promise<void>;
  start(): Promise<void>;
  remove(): Promise<void>;
}

export async function restartablePostgres(): Promise<RestartablePostgres> {
  const dataDir = await mkdtemp(join(tmpdir(), 'skiplock-faults-pg-'));
  const port = await anyFreePort();
  const options = { dataDir, port, persistent: true, password: randomSecret() };
  let server: LocalPostgres | undefined = await startEmbeddedPostgres(options);
  const db = pgDb(server.url, { max: 1 });
  try {
    await migrate(db, await loadMigrations());
  } finally {
    await db.close();
  }
  return {
    url: server.url,
    port,
    async stop() {
      await server?.stop();
      server = undefined;
    },
    async start() {
      server = await startEmbeddedPostgres(options);
    },
    async remove() {
      await server?.stop();
      server = undefined;
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

export const STACK_ADMIN_TOKEN = 'faults-admin-token';

/** What `npm start` runs, in front of a given Postgres: the Neon proxy, `wrangler dev`, drains every second. */
export interface WorkerStack {
  url: string;
  proxy: NeonProxy;
  /** Lines the drain timer logged (a drain that failed says so). */
  drainFailures: string[];
  /** What `wrangler dev` and the Worker printed so far (a cron drain logs one JSON line). */
  workerLog(): Promise<string>;
  stop(): Promise<void>;
}

/** How a scenario's stack differs from `npm start`'s. */
export interface WorkerStackOptions {
  /** Worker variables over the stack's own. */
  vars?: Record<string, string>;
  /** Fire no drains: the scenario fires its own cron ticks. */
  noDrainTimer?: boolean;
  /** A hop the Worker reaches the Neon proxy through (e.g. heldAnswers), closed with the stack. */
  between?: (proxy: NeonProxy) => Promise<{ address: string; close(): Promise<void> }>;
}

export async function startWorkerStack(
  postgres: { url: string; port: number },
  options: WorkerStackOptions = {},
): Promise<WorkerStack> {
  const dir = await mkdtemp(join(tmpdir(), 'skiplock-faults-stack-'));
  const proxy = await startNeonProxy({ postgres: { host: LOOPBACK, port: postgres.port } });
  const hop = await options.between?.(proxy);
  const envFile = join(dir, 'worker.vars');
  const logFile = join(dir, 'wrangler.log');
  await writeDevVarsFile(envFile, {
    DATABASE_URL: postgres.url,
    ADMIN_TOKEN: STACK_ADMIN_TOKEN,
    LOCAL_NEON_PROXY: hop?.address ?? proxy.address,
    SKIPLOCK_DEV: '1',
    WORKERS_PLAN: 'paid',
    // The scenarios enqueue straight into the database, which the queue clock never hears of: every tick drains.
    IDLE_RECHECK_SECONDS: '1',
    ...options.vars,
  });
  const stopping = new AbortController();
  const { wrangler, url } = await startLocalWorker(
    { variable: 'PORT', requested: undefined },
    { projectRoot, envFile, persistTo: join(dir, 'state'), logFile },
    stopping.signal,
  );
  const drainFailures: string[] = [];
  const trigger: ScheduledTrigger | undefined = options.noDrainTimer
    ? undefined
    : startScheduledTrigger(url, { crons: ['* * * * *'], everySeconds: 1 }, (line) => drainFailures.push(line));
  return {
    url,
    proxy,
    drainFailures,
    workerLog: () => readFile(logFile, 'utf8'),
    async stop() {
      trigger?.stop();
      stopping.abort();
      await wrangler.stop();
      await hop?.close();
      await proxy.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A scenario file's own Postgres and Worker stack: `start` makes them, and
 * both are stopped and removed after the file's tests, whatever they did.
 */
export function workerStackPerFile(): {
  start(options?: WorkerStackOptions): Promise<{ postgres: RestartablePostgres; stack: WorkerStack }>;
} {
  let postgres: RestartablePostgres | undefined;
  let stack: WorkerStack | undefined;
  afterAll(async () => {
    await stack?.stop();
    await postgres?.remove();
  });
  return {
    async start(options) {
      postgres = await restartablePostgres();
      stack = await startWorkerStack(postgres, options);
      return { postgres, stack };
    },
  };
}

/**
 * wrangler dev's own proxy sometimes drops a request that is not a GET on its
 * way to the Worker, when a keep-alive connection between them closes at that
 * moment, and answers 503 text/plain asking for it again
 * (cloudflare/workers-sdk#14641). That answer is not the Worker's, so this
 * sends the request again, as it asks, and counts it in `drops`.
 */
export async function fetchPastDevProxyDrops(
  url: string,
  init: RequestInit,
  drops: { count: number } = { count: 0 },
): Promise<Response> {
  for (;;) {
    const response = await fetch(url, init);
    if (response.status !== 503 || response.headers.get('retry-after') !== '0') return response;
    const text = await response.text();
    if (!text.startsWith('Your worker restarted mid-request')) {
      return new Response(text, { status: response.status, headers: response.headers });
    }
    drops.count++;
  }
}
