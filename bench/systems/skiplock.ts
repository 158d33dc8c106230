import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import type { Logger } from '../../src/drain/logger';
import type { EnqueueInput } from '../../src/engine/enqueue';
import { PRODUCERS } from '../config';
import { incident } from '../progress';
import { readPackageVersion } from './package-version';
import {
  KEY_RATE_LIMIT,
  payloadOf,
  type BenchJob,
  type JobKey,
  type Inventory,
  type QueueSystem,
  type RunningWorkers,
  type SetupName,
  type Settings,
  type SystemDriver,
  type Wakeup,
} from './types';

const QUEUE = 'bench';

/**
 * skiplock's knobs for a Node worker: how it waits for work, and how many
 * jobs one claim takes. By default a claim takes as many jobs as there are
 * free slots; tuned, as the README advises for many short jobs, it claims
 * 500 ahead (like graphile-worker's local queue of 500), in claims of 250,
 * two out at once. Successes are completed in group commits beside the loop
 * in both.
 */
const SETUPS: Record<SetupName, { pollIntervalMs: number; housekeepingIntervalMs: number; claimBatchSize?: number }> = {
  defaults: { pollIntervalMs: 1000, housekeepingIntervalMs: 5000 },
  tuned: { pollIntervalMs: 250, housekeepingIntervalMs: 5000, claimBatchSize: 500 },
};

const payloadSchema = z.object({ n: z.number().int(), tenant: z.string(), text: z.string() });

const quietLogger: Logger = {
  info: () => {},
  warn: (message) => incident('skiplock', message),
  error: (message) => incident('skiplock', message),
};

function jobInput(job: BenchJob): EnqueueInput {
  return { queue: QUEUE, tenant: job.tenant ?? 'default', payload: { ...payloadOf(job) }, ...keyFields(job.key) };
}

/** A serial key is a concurrency key of one slot; a rate key allows KEY_RATE_LIMIT starts a second. */
function keyFields(key: JobKey | undefined): Partial<EnqueueInput> {
  if (key === undefined) return {};
  if (key.kind === 'serial') return { concurrencyKey: key.name, concurrencyLimit: 1 };
  return { rateKey: key.name, rateLimit: KEY_RATE_LIMIT, ratePeriodSeconds: 1 };
}

const inventorySql = /* sql */ `
SELECT count(*) FILTER (WHERE state IN ('scheduled', 'queued', 'retrying', 'held'))::int AS waiting,
       count(*) FILTER (WHERE state = 'running')::int AS running,
       count(*) FILTER (WHERE state = 'succeeded')::int AS succeeded,
       count(*) FILTER (WHERE state IN ('failed', 'cancelled', 'expired'))::int AS failed,
       count(*) FILTER (WHERE state = 'succeeded' AND attempts > 1)::int AS redelivered
FROM skiplock.all_jobs WHERE queue = $1`;

/**
 * The backlog rows as enqueue makes them (tenant row first: a claim joins
 * it), and finished jobs as a completion leaves them in the history.
 */
const fillSql = /* sql */ `
WITH tenant AS (INSERT INTO skiplock.tenants (name) VALUES ('default') ON CONFLICT (name) DO NOTHING),
waiting AS (
  INSERT INTO skiplock.jobs (id, queue, type, state, payload)
  SELECT skiplock.uuid_v7(clock_timestamp(), g), $1, $1, 'queued',
         jsonb_build_object('n', $2::int + g - 1, 'tenant', 'default', 'text', $5::text)
  FROM generate_series(1, $3::int) g
)
INSERT INTO skiplock.finished_jobs
  (id, queue, type, tenant, state, priority, run_at, attempts, max_attempts, lease_seconds, backoff_base_seconds,
   backoff_max_seconds, dedup_window_seconds, created_at, started_at, payload, finished_at, result)
SELECT skiplock.uuid_v7(clock_timestamp(), g), $1, $1, 'default', 'succeeded', 0, now(), 1, 5, 60, 1,
       3600, 0, now(), now(), jsonb_build_object('n', -g, 'tenant', 'default', 'text', $5::text), now(), 'null'
FROM generate_series(1, $4::int) g`;

function describe(setup: SetupName): Settings {
  const options = SETUPS[setup];
  return {
    worker: 'startWorker() from src/node-worker',
    claimBatchSize: options.claimBatchSize ?? 'the free slots (default)',
    completion: 'group commit: one statement in flight, the next takes what finished meanwhile',
    pollIntervalMs: options.pollIntervalMs,
    housekeepingIntervalMs: options.housekeepingIntervalMs,
    listen: true,
  };
}

/** The modules of a skiplock source tree that the benchmark drives, loaded from that tree. */
async function loadTree(root: URL) {
  const from = <Module>(path: string): Promise<Module> => import(new URL(path, root).href) as Promise<Module>;
  const [db, job, claim, complete, enqueueModule, statistics, load, runner, worker] = await Promise.all([
    from<typeof import('../../src/db/pg')>('src/db/pg.ts'),
    from<typeof import('../../src/drain/define-job')>('src/drain/define-job.ts'),
    from<typeof import('../../src/engine/claim-batch')>('src/engine/claim-batch.ts'),
    from<typeof import('../../src/engine/complete')>('src/engine/complete.ts'),
    from<typeof import('../../src/engine/enqueue')>('src/engine/enqueue.ts'),
    from<typeof import('../../src/engine/refresh-statistics')>('src/engine/refresh-statistics.ts'),
    from<typeof import('../../src/migrate/load')>('src/migrate/load.ts'),
    from<typeof import('../../src/migrate/runner')>('src/migrate/runner.ts'),
    from<typeof import('../../src/node-worker/start-worker')>('src/node-worker/start-worker.ts'),
  ]);
  return { ...db, ...job, ...claim, ...complete, ...enqueueModule, ...statistics, ...load, ...runner, ...worker };
}

/**
 * skiplock's driver: this repository's tree, or (`--baseline`) another
 * checkout of it, named `skiplock@<ref>`, so a change is measured against
 * the code before it in the same run.
 */
export function skiplockDriverAt(root: URL, name: SystemDriver['name'], version: string): SystemDriver {
  let tree: ReturnType<typeof loadTree> | undefined;
  return {
    name,
    wakeups: ['listen', 'poll'],
    keyKinds: ['serial', 'rate'],
    version,
    settings: { defaults: describe('defaults'), tuned: describe('tuned') },
    async open(databaseUrl, setup) {
      const {
        pgDb,
        migrate,
        loadMigrations,
        enqueue,
        enqueueBatch,
        defineJob,
        startWorker,
        claimBatch,
        completeMany,
        refreshStatistics,
      } = await (tree ??= loadTree(root));
      const db = pgDb(databaseUrl, { max: PRODUCERS });
      await migrate(db, await loadMigrations());
      const options = SETUPS[setup];
      type Run = Parameters<typeof defineJob<typeof QUEUE, typeof payloadSchema, void>>[2];
      const start = async (concurrency: number, wakeup: Wakeup | undefined, run: Run): Promise<RunningWorkers> => {
        const bench = defineJob(QUEUE, payloadSchema, run);
        const worker = await startWorker({
          databaseUrl,
          handlers: [bench],
          concurrency,
          ...(options.claimBatchSize === undefined ? {} : { claimBatchSize: options.claimBatchSize }),
          pollIntervalMs: options.pollIntervalMs,
          housekeepingIntervalMs: options.housekeepingIntervalMs,
          listen: (wakeup ?? 'listen') === 'listen',
          shutdownGraceMs: 10_000,
          logger: quietLogger,
        });
        return { stop: () => worker.stop() };
      };
      const system: QueueSystem = {
        name,
        setup,
        schema: 'skiplock',
        pollIntervalMs: options.pollIntervalMs,
        claimStatementMarker: 'FROM skiplock.claim_batch(',
        enqueue: async (job) => {
          await enqueue(db, jobInput(job));
        },
        enqueueBatch: async (jobs) => {
          await enqueueBatch(db, jobs.map(jobInput));
        },
        async startWorkers({ concurrency, handler, wakeup }) {
          return start(concurrency, wakeup, (payload) => handler(payload));
        },
        async startStepWorkers({ concurrency, handler, wakeup }) {
          return start(concurrency, wakeup, (payload, ctx) => {
            // A tree from before durable steps (a --baseline) has no ctx.step: its jobs fail the gate, saying why.
            if (ctx.step === undefined) throw new Error(`${name} has no durable steps (ctx.step)`);
            return handler(payload, ctx.step);
          });
        },
        async claimDirect(max, handler) {
          const jobs = await claimBatch(db, { max, workerId: 'bench-direct', types: [QUEUE] });
          for (const job of jobs) await handler(payloadSchema.parse(job.payload));
          await completeMany(db, jobs);
          return jobs.length;
        },
        async inventory() {
          const [row] = await db.query<Inventory>({ text: inventorySql, params: [QUEUE] });
          return row!;
        },
        async fill({ firstN, waiting, finished }) {
          await db.query({ text: fillSql, params: [QUEUE, firstN, waiting, finished, payloadOf({ n: 0 }).text] });
          // As a worker's housekeeping would at its next round: a table this
          // size has planner statistics on a live system.
          await refreshStatistics(db);
        },
        close: () => db.close(),
      };
      return system;
    },
  };
}

export const skiplockDriver = skiplockDriverAt(
  new URL('../../', import.meta.url),
  'skiplock',
  `${readPackageVersion()} (this tree)`,
);

/** The driver of a checkout of another commit (see bench/baseline.ts). */
export function baselineDriver(root: string, ref: string): SystemDriver {
  return skiplockDriverAt(pathToFileURL(`${root}/`), `skiplock@${ref}`, `${readPackageVersion()} at ${ref}`);
}
