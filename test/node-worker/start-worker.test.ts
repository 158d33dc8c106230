import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineJob } from '../../src/drain/define-job';
import { sleep } from '../../src/engine/sleep';
import { enqueue, enqueueBatch, getJobEvents, sendEvent } from '../../src/engine';
import { CLAIMS_AHEAD_AT_ONCE } from '../../src/drain/internal';
import { startWorker, type RunningWorker } from '../../src/node-worker/start-worker';
import type { Db } from '../../src/db/types';
import { engineDatabases } from '../support/engine-db';
import { waitFor } from '../support/wait-for';
import { drain, gate, jobById, recordingLogger, untilStatus } from '../drain/support/drain';

const open = engineDatabases();
const noop = defineJob('noop', z.unknown(), () => ({ ok: true }));

/** Starts a quiet worker and stops it when the test ends, passed or not. */
async function withWorker<T>(
  options: Parameters<typeof startWorker>[0],
  body: (worker: RunningWorker) => Promise<T>,
): Promise<T> {
  const worker = await startWorker({ logger: recordingLogger(), ...options });
  try {
    return await body(worker);
  } finally {
    await worker.stop();
  }
}

/** The worker claimed, on a claim connection of its own, and found nothing: the queue was empty then. */
async function untilClaimedNothing(db: Db): Promise<void> {
  await waitFor('the worker to claim from the empty queue', async () => {
    const [row] = await db.query<{ claims: number }>({
      text: `SELECT count(*)::integer AS claims FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'idle' AND query LIKE '%skiplock.claim_batch(%'`,
      params: [],
    });
    return row!.claims > 0;
  });
}

describe('startWorker', () => {
  it('is woken by the NOTIFY of an enqueue: an idle worker that would not poll for an hour runs the job', async () => {
    const { db, url } = await open('pg');
    await withWorker({ databaseUrl: url, handlers: [noop], pollIntervalMs: 3_600_000 }, async () => {
      // It found the queue empty: only a notification can start the job now.
      await untilClaimedNothing(db);
      const { job } = await enqueue(db, { queue: 'q', type: 'noop' });
      await untilStatus(db, job.id, 'succeeded');
      expect(await jobById(db, job.id)).toMatchObject({ result: { ok: true }, attempts: 1 });
    });
  });

  it('runs durable steps: resumes after a sleep, when the event comes, and when its children end', async () => {
    const { db, url } = await open('pg');
    const child = defineJob('child', z.object({ n: z.number() }), ({ n }) => n + 1);
    let created = 0;
    const workflow = defineJob('workflow', z.object({ key: z.string() }), async ({ key }, ctx) => {
      await ctx.step.do('create', () => {
        created += 1;
      });
      await ctx.step.sleep('nap', 200);
      const event = await ctx.step.waitForEvent<{ ok: boolean }>('approval', { event: 'approved', key });
      const ends = await Promise.all([1, 2].map((n) => ctx.step.invoke(`child ${n}`, child, { n })));
      return { ok: event?.payload.ok, children: ends.map((end) => (end.ok ? end.result : end.status)) };
    });
    // A sleep's end is found by polling, as any scheduled job's; events and children's ends also notify.
    await withWorker({ databaseUrl: url, handlers: [workflow, child], pollIntervalMs: 100 }, async () => {
      const handle = await enqueue(db, workflow, { key: 'k' });
      await waitFor('the workflow to wait for its event', async () => {
        const [row] = await db.query<{ waits: number }>({
          text: 'SELECT count(*)::integer AS waits FROM skiplock.event_waits WHERE job_id = $1',
          params: [handle.id],
        });
        return row!.waits === 1;
      });
      expect((await sendEvent(db, { event: 'approved', key: 'k', payload: { ok: true } })).woken).toBe(1);
      await untilStatus(db, handle.id, 'succeeded');
      expect((await jobById(db, handle.id)).result).toEqual({ ok: true, children: [2, 3] });
      expect(created).toBe(1);
    });
  });

  it('polls when it does not LISTEN', async () => {
    const { db, url } = await open('pg');
    await withWorker({ databaseUrl: url, handlers: [noop], listen: false, pollIntervalMs: 50 }, async () => {
      await untilClaimedNothing(db);
      const { job } = await enqueue(db, { queue: 'q', type: 'noop' });
      await untilStatus(db, job.id, 'succeeded');
    });
  });

  it('on stop, lets running jobs finish within the grace period and hands back the rest', async () => {
    const { db, url } = await open('pg');
    const stopping = gate();
    const quick = defineJob('quick', z.unknown(), async () => {
      await stopping.opened;
      await sleep(300);
    });
    const endless = defineJob('endless', z.unknown(), async (_payload, context) => {
      await context.progress({ started: true });
      await new Promise((resolve) => context.signal.addEventListener('abort', resolve));
    });
    const worker = await startWorker({
      databaseUrl: url,
      handlers: [quick, endless],
      shutdownGraceMs: 1000,
      logger: recordingLogger(),
    });
    const { job: quickJob } = await enqueue(db, { queue: 'q', type: 'quick' });
    const { job: endlessJob } = await enqueue(db, { queue: 'q', type: 'endless' });
    await untilStatus(db, endlessJob.id, 'running');
    await untilStatus(db, quickJob.id, 'running');

    stopping.open();
    await worker.stop();

    expect(await jobById(db, quickJob.id)).toMatchObject({ status: 'succeeded' });
    expect(await jobById(db, endlessJob.id)).toMatchObject({
      status: 'scheduled',
      attempts: 0,
      progress: { started: true },
    });
  });

  it('two workers and a drain share 1,000 jobs: each runs and succeeds exactly once', async () => {
    const { db, url } = await open('pg', 4);
    const runs = new Map<string, number>();
    const counted = defineJob('counted', z.unknown(), async (_payload, context) => {
      runs.set(context.job.id, (runs.get(context.job.id) ?? 0) + 1);
      if (Math.random() < 0.1) await sleep(Math.random() * 10);
    });
    await enqueueBatch(
      db,
      Array.from({ length: 1000 }, () => ({ queue: 'shared', type: 'counted' })),
    );

    // Large batches: the claim is the costly statement on a slow Postgres.
    const options = { databaseUrl: url, handlers: [counted], concurrency: 25, logger: recordingLogger() };
    const workers = await Promise.all([startWorker(options), startWorker(options)]);
    while (
      (
        await db.query<{ left: number }>({
          text: 'SELECT count(*)::integer AS left FROM skiplock.jobs',
          params: [],
        })
      )[0]!.left > 0
    ) {
      await drain(db, [counted]);
    }
    await Promise.all(workers.map((worker) => worker.stop()));

    expect(runs.size).toBe(1000);
    expect([...runs.values()].every((count) => count === 1)).toBe(true);
    const [row] = await db.query<{ completed: number; attempts: number; claimers: number }>({
      text: `SELECT count(*) FILTER (WHERE state = 'succeeded')::integer AS completed,
                    sum(attempts)::integer AS attempts,
                    count(DISTINCT worker_id)::integer AS claimers
             FROM skiplock.finished_jobs`,
      params: [],
    });
    // One claim each: no attempt was handed back or lost.
    expect(row).toMatchObject({ completed: 1000, attempts: 1000 });
    // The work was shared, not taken by one claimer alone.
    expect(row!.claimers).toBeGreaterThanOrEqual(2);
  }, 180_000);

  it('claims only on its own claim connections, whatever else runs: the claim stays planned where it runs', async () => {
    const { db, url } = await open('pg');
    // Jobs of uneven length, so claims, completions, heartbeats and failures overlap.
    const uneven = defineJob('uneven', z.object({ n: z.number() }), async ({ n }) => {
      await sleep(n % 7);
      if (n % 10 === 0) throw new Error('a failure goes through the attempts connections');
    });
    const jobs = 400;
    await enqueueBatch(
      db,
      Array.from({ length: jobs }, (_, n) => ({ queue: 'q', type: 'uneven', payload: { n }, maxAttempts: 1 })),
    );
    const claimers = new Set<number>();
    await withWorker({ databaseUrl: url, handlers: [uneven], concurrency: 8, housekeepingIntervalMs: 20 }, async () => {
      for (;;) {
        const rows = await db.query<{ pid: number; query: string }>({
          text: `SELECT pid, query FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`,
          params: [],
        });
        for (const { pid, query } of rows) if (query.includes('skiplock.claim_batch(')) claimers.add(pid);
        const [{ left }] = (await db.query<{ left: number }>({
          text: 'SELECT count(*)::integer AS left FROM skiplock.jobs',
          params: [],
        })) as [{ left: number }];
        if (left === 0) break;
      }
    });
    const [finished] = await db.query<{ count: number }>({
      text: 'SELECT count(*)::integer AS count FROM skiplock.finished_jobs',
      params: [],
    });
    expect(finished!.count).toBe(jobs);
    // One claim out at a time, and one more beside it when work arrives while it is out: never a connection of the attempts' pool.
    expect(claimers.size).toBeGreaterThanOrEqual(1);
    expect(claimers.size).toBeLessThanOrEqual(CLAIMS_AHEAD_AT_ONCE);
  }, 60_000);

  it('hands back at once the leases a restarted worker of the same id held', async () => {
    const { db, url } = await open('pg');
    const { job } = await enqueue(db, { queue: 'q', type: 'noop', leaseSeconds: 3600 });
    await db.query({
      text: `UPDATE skiplock.jobs SET state = 'running', attempts = 1, worker_id = 'pod-1', lease_token = gen_random_uuid(),
                                      lease_expires_at = now() + interval '1 hour', started_at = now() WHERE id = $1`,
      params: [job.id],
    });

    await withWorker({ databaseUrl: url, handlers: [noop], workerId: 'pod-1' }, () =>
      untilStatus(db, job.id, 'succeeded'),
    );

    expect((await getJobEvents(db, job.id)).map((event) => event.kind)).toEqual([
      'enqueued',
      'claimed',
      'released',
      'claimed',
      'completed',
    ]);
  });
});
