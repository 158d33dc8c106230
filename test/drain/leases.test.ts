import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Db } from '../../src/db/types';
import { defineJob } from '../../src/drain/define-job';
import { sleep } from '../../src/engine/sleep';
import { claimBatch, enqueue, getJobEvents, reapExpiredLeases, type ClaimedJob } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';
import { drain, eventKinds, gate, jobById, untilStatus } from './support/drain';

const open = engineDatabases();

/** Takes a running job away from its drain, as a reaper and another worker would after its lease ran out. */
async function takeOver(db: Db, id: string): Promise<ClaimedJob> {
  for (;;) {
    await db.query({
      text: "UPDATE skiplock.jobs SET lease_expires_at = now() - interval '1 s' WHERE id = $1",
      params: [id],
    });
    // A heartbeat may move the lease again between the two statements: then try again.
    if ((await reapExpiredLeases(db)).some((job) => job.id === id)) break;
  }
  const [claimed] = await claimBatch(db, { max: 1, workerId: 'other-worker' });
  if (claimed?.id !== id) throw new Error('the other worker did not get the job');
  return claimed;
}

describe('leases: heartbeats and fencing', () => {
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
    expect((await getJobEvents(db, job.id)).filter((event) => event.kind === 'lease_extended').length).toBeGreaterThan(
      3,
    );
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
