import { z } from 'zod';
import { pgDb } from '../../src/db/pg';
import { defineJob } from '../../src/drain/define-job';
import type { Logger } from '../../src/drain/logger';
import { claimBatch } from '../../src/engine/claim-batch';
import { completeMany } from '../../src/engine/complete';
import { enqueue, enqueueBatch, type EnqueueInput } from '../../src/engine/enqueue';
import { refreshStatistics } from '../../src/engine/refresh-statistics';
import { loadMigrations } from '../../src/migrate/load';
import { migrate } from '../../src/migrate/runner';
import { startWorker } from '../../src/node-worker/start-worker';
import { PRODUCERS } from '../config';
import { incident } from '../progress';
import { readPackageVersion } from './package-version';
import { payloadOf, type BenchJob, type Inventory, type QueueSystem, type SetupName, type Settings, type SystemDriver } from './types';

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
  return { queue: QUEUE, tenant: job.tenant ?? 'default', payload: { ...payloadOf(job) } };
}

const inventorySql = /* sql */ `
SELECT count(*) FILTER (WHERE state IN ('scheduled', 'queued', 'retrying'))::int AS waiting,
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

export const skiplockDriver: SystemDriver = {
  name: 'skiplock',
  wakeups: ['listen', 'poll'],
  version: `${readPackageVersion()} (this tree)`,
  settings: { defaults: describe('defaults'), tuned: describe('tuned') },
  async open(databaseUrl, setup) {
    const db = pgDb(databaseUrl, { max: PRODUCERS });
    await migrate(db, await loadMigrations());
    const options = SETUPS[setup];
    const system: QueueSystem = {
      name: 'skiplock',
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
        const bench = defineJob(QUEUE, payloadSchema, (payload) => handler(payload));
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
