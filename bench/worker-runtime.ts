/**
 * `npm run bench:workerd`: the Worker's own cost, apart from the dev server.
 * The reference Worker is bundled as `wrangler deploy` would
 * (`--dry-run --outdir`) and served by workerd through Miniflare, with no
 * wrangler process and no proxy Worker in front of it: requests go straight
 * to workerd. Its database is a fresh one on DATABASE_URL's server, reached
 * through the local Neon proxy (in this process) by the real Neon driver.
 *
 * 1. a burst: 64 clients enqueue single no-op jobs for 20 s (fast path on):
 *    requests/s, latency, and workerd's CPU per request;
 * 2. burn-down: JOBS no-op jobs through the cron drain (fired every second)
 *    and its helpers: jobs/s, statements and workerd's CPU per job.
 *
 * CPU per request and per job is read from /proc for each party: workerd
 * (everything the Worker does, and the runtime's own work), this Node process
 * (the clients and the local Neon proxy) and Postgres (when it runs here and
 * its data folder is readable). Prints one JSON object; docs/performance.md
 * quotes it.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Miniflare } from 'miniflare';
import { applyMigrations } from '../src/cli/apply-migrations';
import { startNeonProxy } from '../src/local/neon-proxy';
import { startScheduledTrigger } from '../src/local/scheduled-trigger';
import { TUNING_VARIABLES } from '../src/worker/settings';
import { childrenCpuMs, cpuMeter, type CpuMeter } from './cpu';
import { adminHeaders, BENCH_ADMIN_TOKEN, createBenchDatabase } from './worker-stack';
import { burnDown, enqueueBurst, round, type WorkerTarget } from './worker-workloads';

const jobs = Number(process.env.JOBS ?? 10_000);

/** CPU spent, in ms: by workerd, by this process (clients and Neon proxy), by Postgres when it can be read. */
interface CpuSpent {
  workerd: number;
  node: number;
  postgres: number | undefined;
}

/** Runs `work` and says how much CPU each party spent meanwhile. */
async function withCpu<T>(meter: CpuMeter | undefined, work: () => Promise<T>): Promise<{ result: T; cpu: CpuSpent }> {
  const [workerd, node, server] = [await childrenCpuMs('workerd'), process.cpuUsage(), await meter?.read()];
  const result = await work();
  const nodeSpent = process.cpuUsage(node);
  const serverAfter = await meter?.read();
  return {
    result,
    cpu: {
      workerd: (await childrenCpuMs('workerd')) - workerd,
      node: (nodeSpent.user + nodeSpent.system) / 1000,
      postgres: server === undefined || serverAfter === undefined ? undefined : serverAfter.postgresMs - server.postgresMs,
    },
  };
}

/** CPU per unit of work, in ms, by party. */
function cpuPer(cpu: CpuSpent, units: number): Record<keyof CpuSpent, number | undefined> {
  const per = (ms: number | undefined) => (ms === undefined ? undefined : round(ms / units));
  return { workerd: per(cpu.workerd), node: per(cpu.node), postgres: per(cpu.postgres) };
}

async function main(): Promise<void> {
  const bundleDir = await mkdtemp(join(tmpdir(), 'skiplock-bundle-'));
  execFileSync('npx', ['wrangler', 'deploy', '--dry-run', '--outdir', bundleDir], {
    stdio: 'ignore',
    env: { ...process.env, WRANGLER_SEND_METRICS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false' },
  });
  const database = await createBenchDatabase('workerd');
  const target = new URL(database.url);
  await applyMigrations({
    url: database.url,
    host: target.hostname,
    port: Number(target.port || 5432),
    database: target.pathname.slice(1),
    user: decodeURIComponent(target.username),
    source: 'DATABASE_URL',
  });
  const proxy = await startNeonProxy({ postgres: { host: target.hostname, port: Number(target.port || 5432) } });
  const worker = new Miniflare({
    modules: true,
    scriptPath: join(bundleDir, 'worker.js'),
    // Module names are paths from here: the default, this folder, would name the bundle with '..'.
    modulesRoot: bundleDir,
    compatibilityDate: '2026-04-26',
    compatibilityFlags: ['nodejs_compat'],
    bindings: {
      DATABASE_URL: database.url,
      LOCAL_NEON_PROXY: proxy.address,
      ADMIN_TOKEN: BENCH_ADMIN_TOKEN,
      SKIPLOCK_DEV: '1',
      WORKERS_PLAN: 'paid',
      // As under `npm start`: DRAIN_FANOUT=1 npm run bench:workerd measures without fan-out.
      ...Object.fromEntries(TUNING_VARIABLES.flatMap((name) => (process.env[name] === undefined ? [] : [[name, process.env[name]!]]))),
    },
    durableObjects: { SKIPLOCK_CLOCK: 'SkiplockClock', SKIPLOCK_DRAINER: 'SkiplockDrainer' },
    unsafeTriggerHandlers: true,
    host: '127.0.0.1',
    port: 0,
  });
  const url = (await worker.ready).href.replace(/\/$/, '');
  const trigger = startScheduledTrigger(url, { crons: ['* * * * *'], everySeconds: 1 }, (line) => console.error(line));
  const stack: WorkerTarget = { api: url, headers: adminHeaders, db: database.db, transactions: database.transactions };
  try {
    await sleep(3000);
    const meter = await cpuMeter(database.adminUrl);
    const burst = await withCpu(meter, () => enqueueBurst(stack, 'bench-burst', { clients: 64, seconds: 20 }));
    console.error('burst', burst);
    await sleep(3000);
    const noop = await withCpu(meter, () => burnDown(stack, 'bench-noop', { type: 'noop' }, jobs));
    console.error('no-op', noop);
    console.log(
      JSON.stringify(
        {
          burst: { ...burst.result, cpuMsPerRequest: cpuPer(burst.cpu, burst.result.enqueued + burst.result.failed) },
          noop: { ...noop.result, cpuMsPerJob: cpuPer(noop.cpu, noop.result.jobs) },
        },
        null,
        2,
      ),
    );
  } finally {
    trigger.stop();
    await worker.dispose();
    await proxy.close();
    await database.drop();
    await rm(bundleDir, { recursive: true, force: true });
  }
}

await main();
