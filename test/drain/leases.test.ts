import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Db } from '../../src/db/types';
import { defineJob } from '../../src/drain/define-job';
import { AttemptInterrupted } from '../../src/drain/job-errors';
import { sleep } from '../../src/drain/sleep';
import { claimBatch, enqueue, getJobEvents, reapExpiredLeases, type ClaimedJob } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';
import { drain, eventKinds, gate, jobById, untilStatus } from './support/drain';

const open = engineDatabases();

/** Takes a running job away from its drain, as a reaper and another worker would after its lease ran out. */
async function takeOver(db: Db, id: string): Promise<ClaimedJob> {
  for (;;) {
    await db.query({ text: "UPDATE skiplock.jobs SET lease_expires_at = now() - interval '1 s' WHERE id = $1", params: [id] });
    // A heartbeat may move the lease again between the two statements: then try again.
    if ((await reapExpiredLeases(db)).some((job) => job.id === id)) break;
  }
  const [claimed] = await claimBatch(db, { max: 1, workerId: 'other-worker' });
  if (claimed?.id !== id) throw new Error('the other worker did not get the job');
  return claimed;
}

describe('leases, deadlines and hand-backs', () => {
  it('stops a job at the deadline, hands it back, and a later drain finishes it from its progress', async () => {
    const { db } = await open('pg');
    const reasons: unknown[] = [];
    const twoPart = defineJob('two-part', z.unknown(), async (_payload, context) => {
      if (context.job.progress !== null) return { finishedFrom: context.job.progress };
      await context.progress({ part: 1 });
      await new Promise((resolve) => context.signal.addEventListener('abort', resolve));
      reasons.push(context.signal.reason);
      return 'never stored';
    });
    const { job } = await enqueue(db, { queue: 'two-part' });

    const first = await drain(db, [twoPart], { budgetSeconds: 6, housekeeping: false, handBackDelaySeconds: 0 });

    expect(reasons[0]).toBeInstanceOf(AttemptInterrupted);
    expect(reasons[0]).toMatchObject({ why: 'deadline', name: 'DrainDeadline' });
    expect(first).toMatchObject({ claimed: 1, handedBack: 1, succeeded: 0 });
    // It moved forward (saved progress), so being cut off cost no attempt.
    expect(await jobById(db, job.id)).toMatchObject({ status: 'queued', attempts: 0, progress: { part: 1 } });

    const second = await drain(db, [twoPart]);

    expect(second).toMatchObject({ claimed: 1, succeeded: 1 });
    expect(await jobById(db, job.id)).toMatchObject({ status: 'succeeded', attempts: 1, result: { finishedFrom: { part: 1 } } });
    expect(await eventKinds(db, job.id)).toEqual([
      'enqueued', 'claimed', 'lease_extended', 'released', 'claimed', 'completed',
    ]);
  });

  it('does not wait for a handler that ignores the deadline, and counts the attempt when no progress was saved', async () => {
    const { db } = await open('pg');
    const stubborn = defineJob('stubborn', z.unknown(), () => sleep(20_000));
    const { job } = await enqueue(db, { queue: 'stubborn' });

    const counts = await drain(db, [stubborn], { budgetSeconds: 6, housekeeping: false });

    expect(counts).toMatchObject({ handedBack: 1 });
    expect(await jobById(db, job.id)).toMatchObject({ status: 'scheduled', attempts: 1 });
  });

  it('heartbeats keep a job whose lease is shorter than its run from being reaped', async () => {
    const { db } = await open('pg');
    const long = defineJob('long', z.unknown(), () => sleep(7000));
    const { job } = await enqueue(db, { queue: 'long', leaseSeconds: 3 });
    let reaping = true;
    const reaper = (async () => {
      let reaped = 0;
      while (reaping) {
        reaped += (await reapExpiredLeases(db)).length;
        await sleep(100);
      }
      return reaped;
    })();

    const counts = await drain(db, [long]);
    reaping = false;

    expect(await reaper).toBe(0);
    expect(counts).toMatchObject({ claimed: 1, succeeded: 1, leaseLost: 0 });
    expect(await jobById(db, job.id)).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect((await getJobEvents(db, job.id)).filter((event) => event.kind === 'lease_extended').length).toBeGreaterThan(3);
  });

  it('heartbeats within the lease the claim granted, even when the job type asks for longer ones', async () => {
    const { db } = await open('pg');
    const patient = defineJob('patient', z.unknown(), () => sleep(5000), { leaseSeconds: 60 });
    const { job } = await enqueue(db, { queue: 'patient', leaseSeconds: 3 });
    let reaping = true;
    const reaper = (async () => {
      while (reaping) {
        await reapExpiredLeases(db);
        await sleep(100);
      }
    })();

    await drain(db, [patient]);
    reaping = false;
    await reaper;

    expect(await jobById(db, job.id)).toMatchObject({ status: 'succeeded', attempts: 1 });
    // One heartbeat within the first lease, and then the 60 s lease needed no other.
    expect((await eventKinds(db, job.id)).filter((kind) => kind === 'lease_extended')).toHaveLength(1);
  });

  it('never completes a job whose lease was taken over while it ran; the new owner finishes it', async () => {
    const { db } = await open('pg');
    const takenOver = gate();
    const slow = defineJob('slow', z.unknown(), async () => {
      await takenOver.opened;
      return 'from the old run';
    });
    const { job } = await enqueue(db, { queue: 'slow', leaseSeconds: 60 });

    const draining = drain(db, [slow]);
    await untilStatus(db, job.id, 'running');
    const newOwner = await takeOver(db, job.id);
    takenOver.open();
    const counts = await draining;

    expect(counts).toMatchObject({ succeeded: 0, leaseLost: 1 });
    expect(await jobById(db, job.id)).toMatchObject({ status: 'running', workerId: 'other-worker', result: null });
    expect(newOwner.attempts).toBe(2);
  });

  it('stops the old run at its next heartbeat once its lease is taken over', async () => {
    const { db } = await open('pg');
    const reasons: unknown[] = [];
    const watchful = defineJob('watchful', z.unknown(), async (_payload, context) => {
      await new Promise((resolve) => context.signal.addEventListener('abort', resolve));
      reasons.push(context.signal.reason);
    });
    const { job } = await enqueue(db, { queue: 'watchful', leaseSeconds: 1 });

    const draining = drain(db, [watchful]);
    await untilStatus(db, job.id, 'running');
    await takeOver(db, job.id);
    const counts = await draining;

    expect(reasons[0]).toMatchObject({ why: 'lease-lost' });
    expect(counts).toMatchObject({ succeeded: 0, leaseLost: 1, handedBack: 0 });
    expect(await eventKinds(db, job.id)).not.toContain('completed');
  });
});
