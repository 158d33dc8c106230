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
 * round trip away, as Neon is from a deployed Worker; a list (0,20,50) runs
 * a pass at each and prints the table with issue 42's targets
 * (bench/workerd-round-trips.ts; UPDATE_BENCHMARKS=1 writes it into
 * docs/benchmarks.md). DRAIN_FANOUT=1 measures without fan-out.
 *
 * CPU per request and per job is read from /proc for each party: workerd
 * (everything the Worker does, and the runtime's own work), this Node process
 * (the clients and the local Neon proxy) and Postgres (when it runs here and
 * its data folder is readable). Prints one JSON object; docs/performance.md
 * quotes it. Its `costInputs` are what each job cost in billed units
 * (requests, Durable Object requests and duration, CPU, bytes), counted in
 * workerd by the bench's entry module (workerd-invocations.js), in the Neon
 * proxy and in Postgres; `npm run docs:cost` turns them into docs/cost.md.
 */
import { cpus, loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { networkDelayFrom } from '../src/local/neon-proxy';
import { TUNING_VARIABLES } from '../src/worker/settings';
import type { CostInputs, RunCostInputs } from './cost-inputs';
import { type CpuMeter, cpuMeter, cpuPer, withCpu } from './cpu';
import { adminHeaders, type BenchDatabase, createBenchDatabase } from './worker-stack';
import { type Invocations, startWorkerdStack, type WorkerdStack } from './workerd-stack';
import { burnDown, enqueueBurst, serialEnqueues, type WorkerTarget } from './worker-workloads';
import { roundTripSection, roundTripsFrom, roundTripTargets, updateBenchmarksPage } from './workerd-round-trips';

const jobs = Number(process.env.JOBS ?? 10_000);

async function main(): Promise<void> {
  const roundTrips = roundTripsFrom(process.env.NEON_PROXY_ROUND_TRIP_MS);
  const command = commandLine();
  const runs: Awaited<ReturnType<typeof measure>>[] = [];
  for (const roundTripMs of roundTrips) {
    // The proxy reads its round trip from the environment, as under `npm start`.
    process.env.NEON_PROXY_ROUND_TRIP_MS = String(roundTripMs);
    runs.push(await measure(command));
  }
  if (runs.length === 1) {
    console.log(JSON.stringify(runs[0], null, 2));
    return;
  }
  const section = roundTripSection(runs, command);
  console.log(JSON.stringify({ runs, targets: roundTripTargets(runs) }, null, 2));
  console.error(section);
  if (process.env.UPDATE_BENCHMARKS === '1') await updateBenchmarksPage(section);
}

/** One pass at the round trip the environment sets: what bench:workerd prints for it. */
async function measure(command: string) {
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
    const measure = costMeter(workerd, database, meter);
    const burst = await measure(
      () => enqueueBurst(stack, 'bench-burst', { clients: 64, seconds: 20 }),
      (result) => result.enqueued + result.failed,
    );
    console.error('burst', burst.result);
    await sleep(3000);
    const noop = await measure(
      () => burnDown(stack, 'bench-noop', { type: 'noop' }, jobs),
      (result) => result.jobs,
    );
    console.error('no-op', noop.result);
    const io = await measure(
      () => burnDown(stack, 'bench-io', { type: 'sleep', payload: { ms: 50 } }, jobs / 10),
      (result) => result.jobs,
    );
    console.error('50 ms I/O', io.result);
    const costInputs: RunCostInputs = {
      measuredAt: new Date().toISOString(),
      command,
      postgres: await serverVersion(database.db),
      machine: { cpus: cpus().length, model: cpus()[0]?.model ?? 'unknown', loadAverage: loadavg() },
      cronEverySeconds: 1,
      workerVariables: vars,
      noop: noop.inputs,
      io: io.inputs,
      singleEnqueues: burst.inputs,
    };
    return {
      networkDelay: networkDelayFrom(process.env),
      measuredAt: costInputs.measuredAt,
      loadAverage: loadavg(),
      single,
      batch,
      idleStart,
      burst: { ...burst.result, cpuMsPerRequest: cpuPer(burst.cpu, burst.units) },
      noop: {
        ...noop.result,
        cpuMsPerJob: cpuPer(noop.cpu, noop.units),
        tripsPerJob: noop.inputs.databaseTripsPerJob,
      },
      io: { ...io.result, cpuMsPerJob: cpuPer(io.cpu, io.units), tripsPerJob: io.inputs.databaseTripsPerJob },
      costInputs,
    };
  } finally {
    await workerd.stop();
    await database.drop();
  }
}

/** Four significant figures: per-job counts run from thousands to ten-thousandths. */
const perJob = (total: number, jobs: number) => Number((total / jobs).toPrecision(4));

/** Runs workloads, each with its CPU, invocations, trips to the database and bytes measured around it. */
function costMeter(workerd: WorkerdStack, database: BenchDatabase, meter: CpuMeter | undefined) {
  return async <T>(run: () => Promise<T>, jobsOf: (result: T) => number) => {
    const before = {
      invocations: await workerd.invocations(),
      traffic: workerd.traffic(),
      storage: await storage(database),
    };
    const statementsBefore = await database.transactions();
    const { result, cpu } = await withCpu(meter, run);
    const after = {
      invocations: await workerd.invocations(),
      traffic: workerd.traffic(),
      storage: await storage(database),
    };
    // pg_stat_database counts a transaction up to a second after it ends; with the queue clock, idle ticks run none.
    await sleep(2000);
    const statements = (await database.transactions()) - statementsBefore;
    const jobs = jobsOf(result);
    const per = (total: number) => perJob(total, jobs);
    const objects = (name: keyof Invocations['objects']) => ({
      requests: after.invocations.objects[name].requests - before.invocations.objects[name].requests,
      alarms: after.invocations.objects[name].alarms - before.invocations.objects[name].alarms,
      activeMs: after.invocations.objects[name].activeMs - before.invocations.objects[name].activeMs,
    });
    const clock = objects('SkiplockClock');
    const helpers = objects('SkiplockDrainer');
    const inputs: CostInputs = {
      jobs,
      workerRequestsPerJob: {
        http: per(after.invocations.requests - before.invocations.requests),
        cron: per(after.invocations.scheduled - before.invocations.scheduled),
      },
      durableObjectRequestsPerJob: {
        clock: per(clock.requests),
        helperStarts: per(helpers.requests),
        helperAlarms: per(helpers.alarms),
      },
      durableObjectActiveMsPerJob: { clock: per(clock.activeMs), helpers: per(helpers.activeMs) },
      workerdCpuMsPerJob: per(cpu.workerd),
      databaseCpuMsPerJob: cpu.postgres === undefined ? null : per(cpu.postgres),
      databaseTripsPerJob: {
        http: per(after.traffic.httpRequests - before.traffic.httpRequests),
        webSocket: per(after.traffic.webSocketMessages - before.traffic.webSocketMessages),
      },
      // The workloads' own reads (a count every 250 ms) are a few statements in thousands; left in.
      statementsPerJob: per(statements),
      bytesPerJob: {
        tablesAndIndexes: per(after.storage.tablesAndIndexes - before.storage.tablesAndIndexes),
        wal: per(after.storage.wal - before.storage.wal),
      },
    };
    return { result, cpu, units: jobs, inputs };
  };
}

/**
 * skiplock's tables with their indexes and TOAST in the bench database, and
 * the server's WAL position (server-wide: anything else writing to the same
 * server is counted too), in bytes.
 */
async function storage(database: BenchDatabase): Promise<{ tablesAndIndexes: number; wal: number }> {
  const [row] = await database.db.query<{ relations: string; wal: string }>({
    text: `SELECT (SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c
                     JOIN pg_namespace n ON n.oid = c.relnamespace
                    WHERE n.nspname = 'skiplock' AND c.relkind IN ('r', 'm'))::text AS relations,
                  (pg_current_wal_lsn() - '0/0'::pg_lsn)::text AS wal`,
    params: [],
  });
  return { tablesAndIndexes: Number(row!.relations), wal: Number(row!.wal) };
}

async function serverVersion(db: BenchDatabase['db']): Promise<string> {
  const [row] = await db.query<{ version: string }>({
    text: "SELECT current_setting('server_version') AS version",
    params: [],
  });
  return `PostgreSQL ${row!.version}`;
}

/** The command that reproduces this run: its settings from the environment, then the script. */
function commandLine(): string {
  const settings = ['JOBS', 'NEON_PROXY_ROUND_TRIP_MS', 'NEON_PROXY_JITTER_MS', ...TUNING_VARIABLES]
    .filter((name) => process.env[name] !== undefined)
    .map((name) => `${name}=${process.env[name]}`);
  return [...settings, 'npm run bench:workerd'].join(' ');
}

await main();
