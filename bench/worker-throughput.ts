/**
 * `npm run bench:worker`: jobs through `npm start`'s Worker alone (its cron
 * and fast-path drains in workerd over the Neon HTTP driver and the local
 * proxy; no Node worker), on a fresh database on DATABASE_URL's server, the
 * cron fired every second. Statements are that database's transactions
 * (pg_stat_database), less the script's own progress reads.
 *
 * 1. burn-down: JOBS no-op jobs enqueued in batches of 1,000, then until all finished;
 * 2. the same with jobs that wait 50 ms (I/O-bound);
 * 3. a burst: 64 clients enqueue single no-op jobs for 20 s: enqueue rate and
 *    latency, and enqueue-to-start of the jobs.
 *
 * Prints one JSON object; docs/benchmarks.md quotes it. `npm run bench:workerd`
 * runs the same workloads against the Worker in workerd without the dev server.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { burnDown, enqueueBurst } from './worker-workloads';
import { startWorkerStack } from './worker-stack';

const jobs = Number(process.env.JOBS ?? 3000);

async function main(): Promise<void> {
  const stack = await startWorkerStack({ name: 'worker', drainEverySeconds: 1 });
  try {
    await sleep(3000);
    const noop = await burnDown(stack, 'bench-noop', { type: 'noop' }, jobs);
    console.error('no-op', noop);
    await sleep(3000);
    const io = await burnDown(stack, 'bench-io', { type: 'sleep', payload: { ms: 50 } }, jobs);
    console.error('I/O 50 ms', io);
    await sleep(3000);
    const burst = await enqueueBurst(stack, 'bench-burst', { clients: 64, seconds: 20 });
    console.log(JSON.stringify({ noop, io50ms: io, burst }, null, 2));
  } finally {
    await stack.stop();
  }
}

await main();
