import { execFileSync } from 'node:child_process';
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { Miniflare } from 'miniflare';
import { applyMigrations } from '../src/cli/apply-migrations';
import { networkDelayFrom, type NeonProxyTraffic, startNeonProxy } from '../src/local/neon-proxy';
import { startScheduledTrigger } from '../src/local/scheduled-trigger';
import { BENCH_ADMIN_TOKEN } from './worker-stack';

/** The reference Worker served by workerd alone, on a database of its own. */
export interface WorkerdStack {
  /** The Worker's own socket in workerd: no wrangler, no proxy Worker, not Miniflare's entry Worker. */
  url: string;
  /** Miniflare's entry Worker, which serves the scheduled trigger's path (`/cdn-cgi/handler/scheduled`). */
  entryUrl: string;
  /** Where the bundle is: worker.js, and worker.js.map when asked for. */
  bundleDir: string;
  /** What the Worker has sent towards Postgres through the Neon proxy so far. */
  traffic(): NeonProxyTraffic;
  /** The invocations workerd has served so far, counted by the bench's entry module (workerd-invocations.js). */
  invocations(): Promise<Invocations>;
  stop(): Promise<void>;
}

export interface WorkerdStackOptions {
  /** Write worker.js.map beside the bundle, to name the sources of a profile's functions. */
  sourceMaps?: boolean;
  /** Serve the DevTools protocol on this port, for a CPU profile. */
  inspectorPort?: number;
  /** Fire the cron every second (the default), or never, to measure requests alone. */
  cron?: boolean;
  /** The checkout whose Worker to bundle (its wrangler.toml and sources); the working folder by default. */
  checkout?: string;
}

/** What workerd-invocations.js counts: the invocations Cloudflare bills. */
export interface Invocations {
  /** HTTP requests to the Worker (enqueues, the scheduled trigger's nudges). */
  requests: number;
  /** Cron invocations (`scheduled()`). */
  scheduled: number;
  /** Per Durable Object class: requests (`fetch`), alarm invocations, and the wall time an object had one running. */
  objects: Record<'SkiplockClock' | 'SkiplockDrainer', { requests: number; alarms: number; activeMs: number }>;
}

/** Answered by workerd-invocations.js, never passed to the Worker. */
const INVOCATIONS_PATH = '/.well-known/skiplock-bench-invocations';

/**
 * Bundles the reference Worker as `wrangler deploy` would (`--dry-run
 * --outdir`), migrates `databaseUrl`, and serves the bundle from workerd
 * through Miniflare with the Durable Objects it binds, the local Neon proxy
 * (in this process) in front of the database, and its cron fired every
 * second. `vars` are Worker variables beside the stack's own (DRAIN_FANOUT...).
 * workerd serves the bundle behind the bench's own entry module, which
 * counts invocations and hands every one to the bundle unchanged.
 */
export async function startWorkerdStack(
  databaseUrl: string,
  vars: Record<string, string> = {},
  options: WorkerdStackOptions = {},
): Promise<WorkerdStack> {
  const bundleDir = await mkdtemp(join(tmpdir(), 'skiplock-bundle-'));
  const sourceMaps = options.sourceMaps ? ['--upload-source-maps'] : [];
  execFileSync('npx', ['wrangler', 'deploy', '--dry-run', '--outdir', bundleDir, ...sourceMaps], {
    stdio: 'ignore',
    ...(options.checkout === undefined ? {} : { cwd: options.checkout }),
    env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false' },
  });
  await copyFile(new URL('./workerd-invocations.js', import.meta.url), join(bundleDir, 'entry.js'));
  const target = new URL(databaseUrl);
  const postgres = { host: target.hostname, port: Number(target.port || 5432) };
  await applyMigrations({
    url: databaseUrl,
    ...postgres,
    database: target.pathname.slice(1),
    user: decodeURIComponent(target.username),
    source: 'DATABASE_URL',
  });
  // NEON_PROXY_ROUND_TRIP_MS puts the database a round trip away, as from a Worker to Neon.
  const proxy = await startNeonProxy({ postgres, networkDelay: networkDelayFrom(process.env) });
  const worker = new Miniflare({
    // Listed rather than found from the entry: Miniflare's own parser cannot read every bundle wrangler writes.
    modules: [
      { type: 'ESModule', path: join(bundleDir, 'entry.js') },
      { type: 'ESModule', path: join(bundleDir, 'worker.js') },
    ],
    // Module names are paths from here: the default, the working folder, would name the bundle with '..'.
    modulesRoot: bundleDir,
    compatibilityDate: '2026-04-26',
    compatibilityFlags: ['nodejs_compat'],
    bindings: {
      DATABASE_URL: databaseUrl,
      LOCAL_NEON_PROXY: proxy.address,
      ADMIN_TOKEN: BENCH_ADMIN_TOKEN,
      SKIPLOCK_DEV: '1',
      WORKERS_PLAN: 'paid',
      ...vars,
    },
    durableObjects: { SKIPLOCK_CLOCK: 'SkiplockClock', SKIPLOCK_DRAINER: 'SkiplockDrainer' },
    unsafeTriggerHandlers: true,
    // The drains' summary lines would bury the harness's own unless asked for (LOG_LEVEL=info); errors and warnings still show.
    handleRuntimeStdio(stdout: Readable, stderr: Readable) {
      if (vars.LOG_LEVEL === 'info' || vars.LOG_LEVEL === 'debug') stdout.pipe(process.stderr);
      else stdout.resume();
      stderr.pipe(process.stderr);
    },
    host: '127.0.0.1',
    port: 0,
    // The Worker's own socket, as Cloudflare's edge reaches a deployed one:
    // Miniflare's entry Worker (its URL below) is a hop no deployment has.
    unsafeDirectSockets: [{ host: '127.0.0.1', port: 0 }],
    ...(options.inspectorPort === undefined ? {} : { inspectorPort: options.inspectorPort }),
  });
  // The scheduled trigger's path is served by Miniflare's entry Worker.
  const entryUrl = (await worker.ready).href.replace(/\/$/, '');
  const url = (await worker.unsafeGetDirectURL()).href.replace(/\/$/, '');
  const trigger =
    options.cron === false
      ? undefined
      : startScheduledTrigger(entryUrl, { crons: ['* * * * *'], everySeconds: 1 }, (line) => console.error(line));
  return {
    url,
    entryUrl,
    bundleDir,
    traffic: () => proxy.traffic(),
    async invocations() {
      const response = await fetch(`${url}${INVOCATIONS_PATH}`);
      if (!response.ok) throw new Error(`invocation counts: ${response.status} ${await response.text()}`);
      return (await response.json()) as Invocations;
    },
    async stop() {
      trigger?.stop();
      await worker.dispose();
      await proxy.close();
      await rm(bundleDir, { recursive: true, force: true });
    },
  };
}
