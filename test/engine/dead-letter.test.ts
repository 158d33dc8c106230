import { describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/types';
import {
  claimBatch,
  complete,
  enqueue,
  fail,
  getJob,
  getJobEvents,
  getQueue,
  InvalidInputError,
  reapExpiredLeases,
  setQueue,
} from '../../src/engine';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();

/** Claims the job (the only one waiting in its queue) and fails it for good. */
async function failForGood(db: Db, queue: string): Promise<void> {
  const [claimed] = await claimBatch(db, { max: 1, workerId: 'w', queues: [queue] });
  await fail(db, { ...claimed!, error: { message: `no luck in ${queue}` }, forGood: true });
}

describe('dead-letter queues', () => {
  it('moves a job that fails for good to its queue’s dead-letter queue, once, with fresh attempts', async () => {
    const { db } = await open('pg');
    await setQueue(db, 'emails', { concurrency: null, weight: 1, deadLetterQueue: 'emails-dead' });
    expect(await getQueue(db, 'emails')).toMatchObject({ deadLetterQueue: 'emails-dead', custom: true });
    const { job } = await enqueue(db, {
      queue: 'emails',
      payload: { to: 'a@example.com' },
      maxAttempts: 3,
      tags: ['welcome'],
    });

    await failForGood(db, 'emails');

    expect(await getJob(db, job.id)).toMatchObject({
      queue: 'emails-dead',
      status: 'queued',
      attempts: 0,
      maxAttempts: 3,
      payload: { to: 'a@example.com' },
      tags: ['welcome'],
      lastError: { message: 'no luck in emails' },
    });
    const events = (await getJobEvents(db, job.id)).filter((event) => ['failed', 'retried'].includes(event.kind));
    expect(events.map((event) => event.kind)).toEqual(['failed', 'retried']);
    expect(events[1]!.detail).toEqual({ deadLetter: true, fromQueue: 'emails' });

    // Failing for good again, it stays failed, even where the dead-letter queue names one of its own.
    await setQueue(db, 'emails-dead', { concurrency: null, weight: 1, deadLetterQueue: 'emails' });
    await failForGood(db, 'emails-dead');
    expect(await getJob(db, job.id)).toMatchObject({ queue: 'emails-dead', status: 'failed' });
  });

  it('moves a job whose lease ran out on its last attempt; leaves succeeded jobs, keyed jobs and other queues alone', async () => {
    const { db } = await open('pg');
    await setQueue(db, 'sync', { concurrency: null, weight: 1, deadLetterQueue: 'sync-dead' });
    const lapsed = (await enqueue(db, { queue: 'sync', maxAttempts: 1 })).job.id;
    await claimBatch(db, { max: 1, workerId: 'crashed', queues: ['sync'] });
    await db.query({
      text: "UPDATE skiplock.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
      params: [lapsed],
    });
    await reapExpiredLeases(db);
    expect(await getJob(db, lapsed)).toMatchObject({ queue: 'sync-dead', status: 'queued' });

    const succeeded = (await enqueue(db, { queue: 'sync' })).job.id;
    const [claimed] = await claimBatch(db, { max: 1, workerId: 'w', queues: ['sync'] });
    await complete(db, claimed!);
    expect(await getJob(db, succeeded)).toMatchObject({ queue: 'sync', status: 'succeeded' });

    // A keyed job's key settles where it failed: it stays.
    const keyed = (await enqueue(db, { queue: 'sync', concurrencyKey: 'acct-1' })).job.id;
    await failForGood(db, 'sync');
    expect(await getJob(db, keyed)).toMatchObject({ queue: 'sync', status: 'failed' });
    // So does a rate key's, though its key record was released when it started.
    const rateKeyed = (await enqueue(db, { queue: 'sync', rateKey: 'acct-1', rateLimit: 5, ratePeriodSeconds: 1 })).job
      .id;
    await failForGood(db, 'sync');
    expect(await getJob(db, rateKeyed)).toMatchObject({ queue: 'sync', status: 'failed' });

    const elsewhere = (await enqueue(db, { queue: 'plain' })).job.id;
    await failForGood(db, 'plain');
    expect(await getJob(db, elsewhere)).toMatchObject({ queue: 'plain', status: 'failed' });
  });

  it('refuses a queue as its own dead-letter queue by name, changing nothing', async () => {
    const { db } = await open('pg');
    await setQueue(db, 'emails', { concurrency: 2, weight: 1, deadLetterQueue: 'emails-dead' });
    const refused = setQueue(db, 'emails', { concurrency: 5, weight: 1, deadLetterQueue: 'emails' });
    await expect(refused).rejects.toBeInstanceOf(InvalidInputError);
    await expect(refused).rejects.toMatchObject({ field: 'deadLetterQueue' });
    expect(await getQueue(db, 'emails')).toMatchObject({ concurrency: 2, deadLetterQueue: 'emails-dead' });
    await expect(
      db.query({ text: "UPDATE skiplock.queues SET dead_letter_queue = name WHERE name = 'emails'", params: [] }),
    ).rejects.toThrow(/queues_dead_letter_queue_another/);
    // Left out, it is none again.
    await setQueue(db, 'emails', { concurrency: 2, weight: 1 });
    expect(await getQueue(db, 'emails')).toMatchObject({ deadLetterQueue: null });
  });
});
