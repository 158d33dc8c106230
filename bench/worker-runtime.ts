/**
 * `npm run bench:workerd`: the Worker's own cost, apart from the dev server.
 * The reference Worker is bundled as `wrangler deploy` would
 * (`--dry-run --outdir`) and served by workerd through Miniflare, with no
 * wrangler process and no proxy Worker in front of it: requests go straight
 * to workerd. Its database is a fresh one on DATABASE_URL's server, reached
 * through the local Neon proxy (in this process) by the real Neon driver.
 *
 * 1. one client, requests one after another: the latency of a single
 *    enqueue and of a batch of 100, and from the send of a job enqueued on
 *    an idle system to its start (the fast path);
 * 2. a burst: 64 clients enqueue single no-op jobs for 20 s (fast path on):
 *    requests/s, latency, and workerd's CPU per request;
 * 3. burn-down: JOBS no-op jobs, then JOBS/10 jobs of 50 ms of I/O, through
 *    the cron drain (fired every second) and its helpers: jobs/s,
 *    statements, trips to the database and workerd's CPU per job.
 *
 * NEON_PROXY_ROUND_TRIP_MS (and NEON_PROXY_JITTER_MS) put the database a
 * round trip away, as Neon is from a deployed Worker; DRAIN_FANOUT=1
 * measures without fan-out.
 *
 * CPU per request and per job is read from /proc for each party: workerd
 * (everything the Worker does, and the runtime's own work), this Node process
 * (the clients and the local Neon proxy) and Postgres (when it runs here and
 * its data folder is readable). Prints one JSON object; docs/performance.md
 * quotes it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { networkDelayFrom } from '../src/local/neon-proxy';
import { TUNING_VARIABLES } from '../src/worker/settings';
import { cpuMeter, cpuPer, withCpu } from './cpu';
import { adminHeaders, createBenchDatabase } from './worker-stack';
import { startWorkerdStack, type WorkerdStack } from './workerd-stack';
import { burnDown, enqueueBurst, round, serialEnqueues, type WorkerTarget } from './worker-workloads';

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
    const single = await serialEnqueues(stack, 'bench-single', { requests: 200, jobsPerRequest: 1 });
    const batch = await serialEnqueues(stack, 'bench-batch', { requests: 50, jobsPerRequest: 100 });
    const idleStart = await serialEnqueues(stack, 'bench-idle', {
      requests: 50,
      jobsPerRequest: 1,
      untilFinished: true,
    });
    console.error('serial', { single, batch, idleStart });
    await sleep(3000);
    const meter = await cpuMeter(database.adminUrl);
    const burst = await withCpu(meter, () => enqueueBurst(stack, 'bench-burst', { clients: 64, seconds: 20 }));
    console.error('burst', burst);
    await sleep(3000);
    const noop = await withTrips(workerd, () =>
      withCpu(meter, () => burnDown(stack, 'bench-noop', { type: 'noop' }, jobs)),
    );
    console.error('no-op', noop);
    const io = await withTrips(workerd, () =>
      withCpu(meter, () => burnDown(stack, 'bench-io', { type: 'sleep', payload: { ms: 50 } }, jobs / 10)),
    );
    console.error('50 ms I/O', io);
    console.log(
      JSON.stringify(
        {
          networkDelay: networkDelayFrom(process.env),
          single,
          batch,
          idleStart,
          burst: { ...burst.result, cpuMsPerRequest: cpuPer(burst.cpu, burst.result.enqueued + burst.result.failed) },
          noop: { ...noop.result, cpuMsPerJob: cpuPer(noop.cpu, noop.result.jobs), tripsPerJob: noop.tripsPerJob },
          io: { ...io.result, cpuMsPerJob: cpuPer(io.cpu, io.result.jobs), tripsPerJob: io.tripsPerJob },
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

/**
 * Runs a burn-down and counts what the Worker sent towards Postgres meanwhile:
 * requests over HTTP and messages over WebSockets, per job.
 */
async function withTrips<T extends { result: { jobs: number } }>(
  workerd: WorkerdStack,
  run: () => Promise<T>,
): Promise<T & { tripsPerJob: { http: number; webSocket: number } }> {
  const before = workerd.traffic();
  const measured = await run();
  const after = workerd.traffic();
  const perJob = (count: number) => round(count / measured.result.jobs);
  return {
    ...measured,
    tripsPerJob: {
      http: perJob(after.httpRequests - before.httpRequests),
      webSocket: perJob(after.webSocketMessages - before.webSocketMessages),
    },
  };
}

await main();
