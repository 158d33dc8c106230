import PgBoss from 'pg-boss';
import { PRODUCERS } from '../config';
import { incident } from '../progress';
import { readPackageVersion } from './package-version';
import {
  payloadOf,
  type BenchJob,
  type BenchPayload,
  type Inventory,
  type QueueSystem,
  type SetupName,
  type Settings,
  type SystemDriver,
} from './types';

const QUEUE = 'bench';
/**
 * Jobs with a serial key go to a queue of the `singleton` policy, with the
 * key as their `singletonKey`: at most one active job per key, kept by a
 * unique index on the active jobs. The policy applies to a whole queue and
 * counts a job without a key as of key '' (one at a time over them all), so
 * plain jobs stay in a standard queue of their own.
 */
const SERIAL_QUEUE = 'bench-serial';

/**
 * pg-boss 10 runs one polling loop per `work()` call: fetch up to
 * `batchSize` jobs, run the handler on them, complete them (without
 * waiting), then sleep out the rest of `pollingIntervalSeconds` (at least
 * 0.5 s) even when it found jobs. Its docs' levers for throughput and
 * latency are therefore the batch size, the polling interval, and
 * `notifyWorker()`: version 10 has no LISTEN/NOTIFY, only that in-process
 * nudge, which works here because the producer shares the process.
 */
interface BossSetup {
  batchSize: number;
  pollingIntervalSeconds: number;
  /** Call notifyWorker() after every send. */
  notify: boolean;
}

const SETUPS: Record<SetupName, BossSetup> = {
  defaults: { batchSize: 1, pollingIntervalSeconds: 2, notify: false },
  tuned: { batchSize: 100, pollingIntervalSeconds: 0.5, notify: true },
};

const inventorySql = /* sql */ `
SELECT count(*) FILTER (WHERE state IN ('created', 'retry'))::int AS waiting,
       count(*) FILTER (WHERE state = 'active')::int AS running,
       count(*) FILTER (WHERE state = 'completed')::int AS succeeded,
       count(*) FILTER (WHERE state IN ('failed', 'cancelled'))::int AS failed,
       count(*) FILTER (WHERE state = 'completed' AND retry_count > 0)::int AS redelivered
FROM pgboss.job WHERE name = ANY($1)`;

const fillSql = /* sql */ `
WITH waiting AS (
  INSERT INTO pgboss.job (name, data, policy)
  SELECT $1, jsonb_build_object('n', $2::int + g - 1, 'tenant', 'default', 'text', $5::text), 'standard'
  FROM generate_series(1, $3::int) g
)
INSERT INTO pgboss.job (name, data, policy, state, started_on, completed_on)
SELECT $1, jsonb_build_object('n', -g, 'tenant', 'default', 'text', $5::text), 'standard', 'completed', now(), now()
FROM generate_series(1, $4::int) g`;

function describe(setup: SetupName): Settings {
  const options = SETUPS[setup];
  return {
    'work() calls': 'one per concurrency slot; the handler runs its batch in series',
    batchSize: options.batchSize,
    pollingIntervalSeconds: options.pollingIntervalSeconds,
    notifyWorker: options.notify ? 'after every send (in-process only)' : 'no',
    'other options': 'library defaults',
  };
}

function newBoss(databaseUrl: string, max: number): PgBoss {
  const boss = new PgBoss({ connectionString: databaseUrl, max });
  boss.on('error', (error) => incident('pg-boss', error.message));
  return boss;
}

/** The queue a job goes to, and its singleton key. */
function placement(job: BenchJob): { name: string; singletonKey?: string } {
  if (job.key === undefined) return { name: QUEUE };
  if (job.key.kind !== 'serial') throw new Error(`pg-boss has no ${job.key.kind} keys`);
  return { name: SERIAL_QUEUE, singletonKey: job.key.name };
}

export const pgBossDriver: SystemDriver = {
  name: 'pg-boss',
  wakeups: ['poll'],
  keyKinds: ['serial'],
  version: readPackageVersion('pg-boss'),
  settings: { defaults: describe('defaults'), tuned: describe('tuned') },
  async open(databaseUrl, setup) {
    const options = SETUPS[setup];
    // The producer is its own instance, as in an application whose web servers send and whose workers work.
    const producer = newBoss(databaseUrl, PRODUCERS);
    await producer.start();
    await producer.createQueue(QUEUE);
    await producer.createQueue(SERIAL_QUEUE, { name: SERIAL_QUEUE, policy: 'singleton' });
    /** Wakes one idle worker per job sent (all of them for a batch); set while workers run. */
    let nudge: ((jobs: number) => void) | undefined;

    const system: QueueSystem = {
      name: 'pg-boss',
      setup,
      schema: 'pgboss',
      pollIntervalMs: options.pollingIntervalSeconds * 1000,
      claimStatementMarker: 'WITH next as',
      async enqueue(job) {
        const { name, singletonKey } = placement(job);
        await producer.send(name, payloadOf(job), singletonKey === undefined ? {} : { singletonKey });
        nudge?.(1);
      },
      async enqueueBatch(jobs) {
        await producer.insert(jobs.map((job) => ({ ...placement(job), data: payloadOf(job) })));
        nudge?.(jobs.length);
      },
      async startWorkers({ concurrency, handler, serialKeys }) {
        const boss = newBoss(databaseUrl, concurrency + 2);
        await boss.start();
        const workOptions = { batchSize: options.batchSize, pollingIntervalSeconds: options.pollingIntervalSeconds };
        const ids: string[] = [];
        for (let i = 0; i < concurrency; i++) {
          ids.push(
            await boss.work<BenchPayload>(serialKeys === true ? SERIAL_QUEUE : QUEUE, workOptions, async (jobs) => {
              for (const job of jobs) await handler(job.data);
            }),
          );
        }
        let next = 0;
        if (options.notify) {
          nudge = (jobs) => {
            for (let i = 0; i < Math.min(jobs, ids.length); i++) boss.notifyWorker(ids[next++ % ids.length]!);
          };
        }
        return {
          async stop() {
            nudge = undefined;
            await boss.stop({ graceful: true, wait: true });
          },
        };
      },
      async claimDirect(max, handler) {
        const jobs = await producer.fetch<BenchPayload>(QUEUE, { batchSize: max });
        for (const job of jobs) await handler(job.data);
        if (jobs.length > 0)
          await producer.complete(
            QUEUE,
            jobs.map((job) => job.id),
          );
        return jobs.length;
      },
      async inventory() {
        const { rows } = await producer.getDb().executeSql(inventorySql, [[QUEUE, SERIAL_QUEUE]]);
        return rows[0] as Inventory;
      },
      async fill({ firstN, waiting, finished }) {
        await producer.getDb().executeSql(fillSql, [QUEUE, firstN, waiting, finished, payloadOf({ n: 0 }).text]);
      },
      close: () => producer.stop({ graceful: false }),
    };
    return system;
  },
};
