import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { DeliveredJob } from '../../src/drain';
import type { Db } from '../../src/db/types';
import { setQueue } from '../../src/engine';
import { sleep } from '../../src/engine/sleep';
import { startReceiver, type Answer, type Received } from '../drain/support/receiver';
import { engineDatabases } from '../support/engine-db';
import { runHistory, untilAllSucceeded } from './support/history';
import { enqueueMany, jobs } from './support/load';
import { processes, type Spawned } from './support/processes';
import { recordScenario, seconds } from './support/report';

const open = engineDatabases();
const spawn = processes(join(tmpdir(), `skiplock-faults-bulk-delivery-${process.pid}.log`));

const JOBS = 3000;
/** POSTs the target answers 500 (the target fails). */
const FAILED_POSTS = 6;
/** POSTs the target accepts while the worker that sent them is killed before it can complete their jobs. */
const KILLED_AFTER_DELIVERY = 4;
const LEASE_SECONDS = 2;
const SECRET = `whsec_${Buffer.from('the target secret of the bulk-delivery scenario').toString('base64')}`;

let closeTarget: (() => Promise<void>) | undefined;
afterEach(async () => {
  await closeTarget?.();
});

interface HeldPost {
  ids: string[];
  answer(reply: Answer): void;
}

async function holderOf(db: Db, ids: readonly string[]): Promise<string | undefined> {
  const [row] = await db.query<{ worker_id: string }>({
    text: "SELECT worker_id FROM skiplock.jobs WHERE id = ANY($1::uuid[]) AND state = 'running' LIMIT 1",
    params: [ids],
  });
  return row?.worker_id;
}

describe('scenario 9: bulk delivery to a webhook that fails, and workers killed between delivery and completion', () => {
  it('delivers every job at least once and completes each once; the duplicates are the jobs of the killed workers', async () => {
    const { db, url } = await open('pg', 4);
    const accepted: string[] = [];
    const held: HeldPost[] = [];
    let failedPosts = 0;
    let answered = 0;
    const target = await startReceiver((request: Received, earlier) => {
      const ids = (JSON.parse(request.body) as { data: { jobs: DeliveredJob[] } }).data.jobs.map((job) => job.id);
      const n = earlier.length;
      if (n % 7 === 3 && failedPosts < FAILED_POSTS) {
        failedPosts += 1;
        return { status: 500 };
      }
      // The target has taken the jobs in: they are delivered, whatever becomes of the sender.
      accepted.push(...ids);
      // One held at a time, so each is another worker's.
      if (n % 5 === 1 && held.length < KILLED_AFTER_DELIVERY && answered === held.length) {
        return new Promise<Answer>((answer) => held.push({ ids, answer }));
      }
      return { status: 200 };
    });
    closeTarget = target.close;
    // Half of the jobs are of the code-defined delivery type; the other half, of three types no handler runs, are in a
    // queue whose delivery target (set as PUT /v1/queues/{queue} sets it) is the same webhook.
    await setQueue(db, 'feed', {
      concurrency: null,
      weight: 1,
      delivery: { target: 'webhook', url: `${target.base}/jobs`, secretName: 'DELIVERY_SECRET_TARGET', batchSize: 50 },
    });
    await enqueueMany(
      db,
      jobs(JOBS, (n) =>
        n % 2 === 0
          ? { queue: 'outbox', type: 'forward', tenant: `t${n % 4}`, payload: { n }, leaseSeconds: LEASE_SECONDS }
          : { queue: 'feed', type: `event.${n % 3}`, tenant: `t${n % 4}`, payload: { n }, leaseSeconds: LEASE_SECONDS },
      ),
    );

    let generation = 0;
    const startWorker = () =>
      spawn.deliveryWorker(url, `delivery-${++generation}`, {
        TARGET_URL: `${target.base}/jobs`,
        TARGET_SECRET: SECRET,
        DELIVERY_SECRET_TARGET: SECRET,
      });
    const live: Spawned[] = await Promise.all([startWorker(), startWorker()]);
    const started = Date.now();

    const killed = new Set<string>();
    /** Held POSTs whose sender was dead when the target answered: killed for it, or before. */
    let unanswered = 0;
    const deadline = Date.now() + 90_000;
    while (
      (answered < KILLED_AFTER_DELIVERY || (await untilAllSucceeded(db, 0)).succeeded < JOBS) &&
      Date.now() < deadline
    ) {
      for (; answered < held.length; answered++) {
        const post = held[answered]!;
        // The POST arrived and the target kept it; its sender dies before it hears back.
        const holder = await holderOf(db, post.ids);
        const victim = live.find((child) => child.workerId === holder);
        if (victim !== undefined) {
          await victim.kill();
          killed.add(victim.workerId);
          live.splice(live.indexOf(victim), 1, await startWorker());
        }
        // Jobs no longer running were reaped: their sender had stopped heartbeating.
        if (holder === undefined || killed.has(holder)) unanswered += 1;
        post.answer({ status: 200 });
      }
      await sleep(100);
    }
    const counts = await untilAllSucceeded(db, 30_000);
    const settledMs = Date.now() - started;

    const delivered = new Set(accepted);
    const enqueued = await db.query<{ id: string; attempts: number }>({
      text: 'SELECT id, attempts FROM skiplock.all_jobs',
      params: [],
    });
    const lost = enqueued.filter((job) => !delivered.has(job.id));
    const duplicates = accepted.length - delivered.size;
    const history = await runHistory(db);

    await recordScenario({
      scenario: 9,
      name: 'Bulk delivery: the target fails, the worker dies between delivery and completion',
      load:
        `${JOBS} jobs delivered in bulk to a webhook (half of a delivery job type defined in code, half of a queue whose ` +
        `delivery target is set in the database; batches of up to 50, 4 tenants) by 2 Node workers, leases of ${LEASE_SECONDS} s`,
      faults: `${failedPosts} POSTs answered 500; ${killed.size} workers SIGKILLed while the target held a POST it had accepted`,
      jobsLost: lost.length + (JOBS - counts.succeeded),
      runTwiceAtOnce: history.runTwiceAtOnce.length,
      limitViolations: 0,
      recovery: `all ${counts.succeeded} succeeded in ${seconds(settledMs)}`,
      notes: [
        `${accepted.length} deliveries accepted by the target for ${delivered.size} jobs: ${duplicates} duplicates (the jobs of the killed workers' POSTs, delivered again after their leases lapsed)`,
        `${target.received.length} POSTs in all`,
      ],
    });

    expect(held).toHaveLength(KILLED_AFTER_DELIVERY);
    expect(unanswered).toBe(KILLED_AFTER_DELIVERY);
    expect(killed.size).toBeGreaterThanOrEqual(1);
    expect(failedPosts).toBe(FAILED_POSTS);
    expect(counts).toEqual({ total: JOBS, succeeded: JOBS });
    expect(lost).toEqual([]);
    // Each killed worker's held POST went again: at least its jobs are delivered twice.
    expect(duplicates).toBeGreaterThanOrEqual(KILLED_AFTER_DELIVERY);
    expect(history.runTwiceAtOnce).toEqual([]);
  });
});
