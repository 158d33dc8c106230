import { pgDb } from '../../../src/db/pg';
import type { Queryable } from '../../../src/db/types';
import {
  claimBatch,
  completeMany,
  enqueueBatch,
  extendLease,
  fail,
  setQueue,
  type ClaimedJob,
  type EnqueueInput,
} from '../../../src/engine';
import { MANUAL_TYPE } from './jobs';

/** A queue of the demo: its tenants, and what it did and holds now. */
interface DemoQueue {
  queue: string;
  tenants: string[];
  /** Finished in the last hour, and how many of those failed. */
  finished: number;
  failed: number;
  running: number;
  queued: number;
  scheduled?: number;
  retrying?: number;
  /** How long the oldest queued job has waited, in minutes. */
  oldestWaitMinutes?: number;
}

const DEMO_QUEUES: DemoQueue[] = [
  {
    queue: 'emails',
    tenants: ['acme', 'globex', 'initech'],
    finished: 480,
    failed: 9,
    running: 4,
    queued: 57,
    oldestWaitMinutes: 3,
  },
  {
    queue: 'thumbnails',
    tenants: ['acme', 'umbrella'],
    finished: 260,
    failed: 4,
    running: 2,
    queued: 12,
    scheduled: 5,
  },
  {
    queue: 'webhooks',
    tenants: ['globex', 'initech'],
    finished: 330,
    failed: 21,
    running: 1,
    queued: 3,
    retrying: 6,
    oldestWaitMinutes: 1,
  },
  {
    queue: 'reports',
    tenants: ['umbrella'],
    finished: 24,
    failed: 2,
    running: 0,
    queued: 1,
    scheduled: 2,
    oldestWaitMinutes: 12,
  },
];

const WORKER = 'demo-worker';

function demoJobs(queue: DemoQueue, count: number, extra: Partial<EnqueueInput> = {}): EnqueueInput[] {
  return Array.from({ length: count }, (_, index) => ({
    queue: queue.queue,
    type: MANUAL_TYPE,
    tenant: queue.tenants[index % queue.tenants.length],
    payload: { demo: index },
    ...extra,
  }));
}

async function enqueueDemoJobs(
  db: Queryable,
  queue: DemoQueue,
  count: number,
  extra: Partial<EnqueueInput> = {},
): Promise<void> {
  if (count > 0) await enqueueBatch(db, demoJobs(queue, count, extra));
}

/** `count` new jobs of the queue, claimed. */
async function claimedJobs(db: Queryable, queue: DemoQueue, count: number): Promise<ClaimedJob[]> {
  if (count === 0) return [];
  await enqueueDemoJobs(db, queue, count);
  return claimBatch(db, { max: count, workerId: WORKER, types: [MANUAL_TYPE], queues: [queue.queue] });
}

/** Runs the queue's finished jobs through a claim, and fails the first `failed` of them for good. */
async function finishJobs(db: Queryable, queue: DemoQueue): Promise<void> {
  const claimed = await claimedJobs(db, queue, queue.finished);
  for (const job of claimed.slice(0, queue.failed)) {
    await fail(db, {
      id: job.id,
      leaseToken: job.leaseToken,
      error: { message: 'HTTP 503 from the destination' },
      forGood: true,
    });
  }
  await completeMany(
    db,
    claimed.slice(queue.failed).map((job) => ({ id: job.id, leaseToken: job.leaseToken, result: { ok: true } })),
  );
}

/**
 * Spreads the finish times over the last hour, more of them half an hour ago
 * than at the edges, so the throughput charts have a shape. Demo data only:
 * the state does not change, so the transition rules do not apply.
 */
const spreadFinishTimesSql = /* sql */ `
UPDATE skiplock.finished_jobs
SET finished_at = now() - ((random() + random() + random()) / 3 * 3500 + 30) * interval '1 second',
    started_at = NULL
WHERE state IN ('succeeded', 'failed')`;

const backdateWaitSql = /* sql */ `
UPDATE skiplock.jobs SET run_at = now() - $2 * interval '1 minute'
WHERE id = (SELECT id FROM skiplock.jobs WHERE queue = $1 AND state = 'queued' ORDER BY id LIMIT 1)`;

async function fillQueue(db: Queryable, queue: DemoQueue): Promise<void> {
  for (const [index, job] of (await claimedJobs(db, queue, queue.running)).entries()) {
    await extendLease(db, job, { progress: { percent: 20 + 25 * index } });
  }
  for (const job of await claimedJobs(db, queue, queue.retrying ?? 0)) {
    await fail(db, { id: job.id, leaseToken: job.leaseToken, error: { message: 'timeout' }, retryInSeconds: 300 });
  }
  await enqueueDemoJobs(db, queue, queue.queued);
  await enqueueDemoJobs(db, queue, queue.scheduled ?? 0, { delaySeconds: 900 });
  if (queue.oldestWaitMinutes)
    await db.query({ text: backdateWaitSql, params: [queue.queue, queue.oldestWaitMinutes] });
}

/** A busy hour on four queues and five tenants, for the screenshots. */
export async function seedDemoData(databaseUrl: string): Promise<void> {
  const db = pgDb(databaseUrl, { max: 1 });
  try {
    for (const queue of DEMO_QUEUES) await finishJobs(db, queue);
    await db.query({ text: spreadFinishTimesSql, params: [] });
    for (const queue of DEMO_QUEUES) await fillQueue(db, queue);
    // Set last, so the demo's own claims above are not held back.
    await setQueue(db, 'thumbnails', { concurrency: 4, weight: 1 });
    await setQueue(db, 'emails', { concurrency: null, weight: 3 });
  } finally {
    await db.close();
  }
}
