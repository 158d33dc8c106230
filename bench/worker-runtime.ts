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
import { setTimeout as sleep } from 'node:timers/promises';
import { TUNING_VARIABLES } from '../src/worker/settings';
import { cpuMeter, cpuPer, withCpu } from './cpu';
import { adminHeaders, createBenchDatabase } from './worker-stack';
import { startWorkerdStack } from './workerd-stack';
import { burnDown, enqueueBurst, type WorkerTarget } from './worker-workloads';

const jobs = Number(process.env.JOBS ?? 10_000);

async function main(): Promise<void> {
  const database = await createBenchDatabase('workerd');
  // As under `npm start`: DRAIN_FANOUT=1 npm run bench:workerd measures without fan-out.
  const vars = Object.fromEntries(
    TUNING_VARIABLES.flatMap((name) => (process.env[name] === undefined ? [] : [[name, process.env[name]!]])),
  );
  const workerd = await startWorkerdStack(database.url, vars);
  const stack: WorkerTarget = {
    api: workerd.url,
    headers: adminHeaders,
    db: database.db,
    transactions: database.transactions,
  };
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
    await workerd.stop();
    await database.drop();
  }
}

await main();
