import { Logger, makeWorkerUtils, run, type WorkerUtils } from 'graphile-worker';
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

const TASK = 'bench';

/**
 * graphile-worker wakes on LISTEN/NOTIFY in both setups. Tuned is the
 * configuration of its own performance page (worker.graphile.org/docs/
 * performance): a local queue of 500 jobs fetched and locked in one
 * statement, and completions and failures batched (delay 0: whatever
 * finished in the same tick goes in one statement). Finished jobs are
 * deleted, so it keeps no history.
 */
interface GraphileSetup {
  pollInterval: number;
  localQueueSize: number | undefined;
  batchDelay: number | undefined;
}

const SETUPS: Record<SetupName, GraphileSetup> = {
  defaults: { pollInterval: 2000, localQueueSize: undefined, batchDelay: undefined },
  tuned: { pollInterval: 2000, localQueueSize: 500, batchDelay: 0 },
};

const logger = new Logger(() => (level, message) => {
  // A failed batch names each of its jobs: one kind of incident, not one per batch.
  if (level === 'error' || level === 'warning') incident('graphile-worker', message.replace(/'\d+'(, '\d+')*/g, '…'));
});

const inventorySql = /* sql */ `
SELECT count(*) FILTER (WHERE j.locked_at IS NULL AND j.last_error IS NULL)::int AS waiting,
       count(*) FILTER (WHERE j.locked_at IS NOT NULL)::int AS running,
       NULL::int AS succeeded,
       count(*) FILTER (WHERE j.locked_at IS NULL AND j.last_error IS NOT NULL)::int AS failed,
       NULL::int AS redelivered
FROM graphile_worker._private_jobs j
JOIN graphile_worker._private_tasks t ON t.id = j.task_id
WHERE t.identifier = $1`;

/** Waiting jobs only: graphile-worker deletes a job when it completes, so there are no finished ones to keep. */
const fillSql = /* sql */ `
WITH task AS (
  INSERT INTO graphile_worker._private_tasks (identifier) VALUES ($1)
  ON CONFLICT (identifier) DO UPDATE SET identifier = EXCLUDED.identifier
  RETURNING id
)
INSERT INTO graphile_worker._private_jobs (task_id, payload, run_at, max_attempts, priority)
SELECT task.id, json_build_object('n', $2::int + g - 1, 'tenant', 'default', 'text', $4::text), now(), 25, 0
FROM task, generate_series(1, $3::int) g`;

function describe(setup: SetupName): Settings {
  const options = SETUPS[setup];
  return {
    pollInterval: options.pollInterval,
    'localQueue.size': options.localQueueSize ?? 'off (-1)',
    completeJobBatchDelay: options.batchDelay ?? 'off (-1)',
    failJobBatchDelay: options.batchDelay ?? 'off (-1)',
    'other options': 'library defaults',
  };
}

/** A serial key is a named queue: graphile-worker runs the jobs of one queue name one at a time. */
function queueOf(job: BenchJob): { queueName?: string } {
  if (job.key === undefined) return {};
  if (job.key.kind !== 'serial') throw new Error(`graphile-worker has no ${job.key.kind} keys`);
  return { queueName: job.key.name };
}

export const graphileWorkerDriver: SystemDriver = {
  name: 'graphile-worker',
  wakeups: ['listen'],
  keyKinds: ['serial'],
  version: readPackageVersion('graphile-worker'),
  settings: { defaults: describe('defaults'), tuned: describe('tuned') },
  async open(databaseUrl, setup) {
    const options = SETUPS[setup];
    const producer: WorkerUtils = await makeWorkerUtils({
      connectionString: databaseUrl,
      maxPoolSize: PRODUCERS,
      logger,
    });
    await producer.migrate();
    const system: QueueSystem = {
      name: 'graphile-worker',
      setup,
      schema: 'graphile_worker',
      pollIntervalMs: options.pollInterval,
      claimStatementMarker: 'for update\n    skip locked',
      async enqueue(job) {
        await producer.addJob(TASK, payloadOf(job), queueOf(job));
      },
      async enqueueBatch(jobs) {
        await producer.addJobs(jobs.map((job) => ({ identifier: TASK, payload: payloadOf(job), ...queueOf(job) })));
      },
      async startWorkers({ concurrency, handler }) {
        const runner = await run({
          connectionString: databaseUrl,
          concurrency,
          maxPoolSize: concurrency + 2,
          pollInterval: options.pollInterval,
          noHandleSignals: true,
          logger,
          taskList: { [TASK]: (payload) => handler(payload as BenchPayload) },
          preset: {
            worker: {
              ...(options.localQueueSize === undefined ? {} : { localQueue: { size: options.localQueueSize } }),
              ...(options.batchDelay === undefined
                ? {}
                : { completeJobBatchDelay: options.batchDelay, failJobBatchDelay: options.batchDelay }),
            },
          },
        });
        // A runner can stop itself on an error (with named queues and batched
        // completions, a deadlock between two completions): it logs it (an
        // incident) and then rejects stop() as already stopped, the only way
        // its stop() fails; the gate judges the jobs it left locked.
        const ended = runner.promise.catch(() => undefined);
        return {
          async stop() {
            await runner.stop().catch(() => undefined);
            await ended;
          },
        };
      },
      async inventory() {
        const [row] = await producer.withPgClient((client) =>
          client.query<Inventory>(inventorySql, [TASK]).then((r) => r.rows),
        );
        return row!;
      },
      async fill({ firstN, waiting }) {
        await producer.withPgClient((client) =>
          client.query(fillSql, [TASK, firstN, waiting, payloadOf({ n: 0 }).text]),
        );
      },
      close: async () => {
        await producer.release();
      },
    };
    return system;
  },
};
