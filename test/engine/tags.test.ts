import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Db } from '../../src/db/types';
import { defineJob } from '../../src/drain';
import {
  bulkAction,
  cancel,
  claimBatch,
  completeMany,
  enqueue,
  enqueueBatch,
  type EnqueueInput,
  expireJobs,
  failMany,
  getJob,
  InvalidInputError,
  listJobs,
  retry,
} from '../../src/engine';
import { DRIVERS } from '../support/drivers';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();
const worker = 'w';

/** Claims every waiting job of the queue and fails them for good with this error, or completes them. */
async function finishAll(db: Db, queue: string, error?: string) {
  const claimed = await claimBatch(db, { max: 100, workerId: worker, queues: [queue] });
  if (error === undefined) {
    await completeMany(
      db,
      claimed.map((job) => ({ id: job.id, leaseToken: job.leaseToken })),
    );
  } else {
    await failMany(
      db,
      claimed.map((job) => ({ id: job.id, leaseToken: job.leaseToken, error: { name: 'Error', message: error } })),
    );
  }
  return claimed.map((job) => job.id);
}

async function listedIds(db: Db, options: Parameters<typeof listJobs>[1]) {
  const page = await listJobs(db, options);
  return page.jobs.map((job) => job.id).sort();
}

describe('tags and search', () => {
  it('keeps tags once each, in order, through enqueue, the history, a retry and the SQL enqueue', async () => {
    const { db } = await open('pg');
    const { job } = await enqueue(db, { queue: 'q', tags: ['env=prod', 'customer:42', 'env=prod'] });
    expect(job.tags).toEqual(['env=prod', 'customer:42']);
    expect((await getJob(db, job.id))?.tags).toEqual(['env=prod', 'customer:42']);
    const { job: untagged } = await enqueue(db, { queue: 'q' });
    expect(untagged.tags).toEqual([]);
    expect((await getJob(db, untagged.id))?.tags).toEqual([]);

    // Completed (the hot path's own column list) and failed (as_finished).
    await finishAll(db, 'q');
    expect((await getJob(db, job.id))?.tags).toEqual(['env=prod', 'customer:42']);
    const { job: failing } = await enqueue(db, { queue: 'f', tags: ['a'], maxAttempts: 1 });
    await finishAll(db, 'f', 'boom');
    expect(await getJob(db, failing.id)).toMatchObject({ status: 'failed', tags: ['a'] });
    expect((await retry(db, failing.id))?.job).toMatchObject({ status: 'queued', tags: ['a'] });

    const [sqlJob] = await db.query<{ job: { tags: string[] } }>({
      text: `SELECT skiplock.enqueue('q', tags => ARRAY['x', 'y', 'x']) AS job`,
      params: [],
    });
    expect(sqlJob!.job.tags).toEqual(['x', 'y']);
  });

  it("takes a live job's tags along however it ends, and a retry puts them back beside it", async () => {
    const { db } = await open('pg');
    const tagged = (queue: string, fields: Partial<EnqueueInput> = {}): EnqueueInput => ({
      queue,
      tags: [queue, 'env=prod'],
      ...fields,
    });
    const rated = { rateKey: 'r', rateLimit: 1, ratePeriodSeconds: 60, rateOnExcess: 'drop' } as const;
    const [done, failed, cancelled, expired, bulk, ratedFirst, dropped, waiting] = (
      await enqueueBatch(db, [
        tagged('done'),
        tagged('failed', { maxAttempts: 1 }),
        tagged('cancelled'),
        tagged('expired', { expiresAt: new Date(Date.now() - 1000) }),
        tagged('bulk'),
        tagged('rated', rated),
        // Dropped at once, by the insert trigger of the statement that writes its tags.
        tagged('rated', rated),
        tagged('waiting'),
      ])
    ).map(({ job }) => job.id);
    const [droppedBySql] = await db.query<{ id: string }>({
      text: `SELECT skiplock.enqueue('rated', tags => ARRAY['rated', 'env=prod'], rate_key => 'r', rate_limit => 1,
                                     rate_period_seconds => 60, rate_on_excess => 'drop')->>'id' AS id`,
      params: [],
    });
    await finishAll(db, 'done');
    await finishAll(db, 'failed', 'boom');
    expect((await cancel(db, cancelled!))?.outcome).toBe('cancelled');
    expect(await expireJobs(db)).toBe(1);
    expect(await bulkAction(db, { action: 'cancel', filter: { queue: 'bulk' } })).toMatchObject({ changed: 1 });

    const ended = { done, failed, cancelled, expired, bulk, dropped, droppedBySql: droppedBySql!.id };
    for (const [name, id] of Object.entries(ended)) {
      const job = await getJob(db, id!);
      expect(job?.status, name).toMatch(/^(succeeded|failed|cancelled|expired)$/);
      expect(job?.tags, name).toEqual([job!.queue, 'env=prod']);
    }
    const beside = async () =>
      (await db.query<{ job_id: string }>({ text: 'SELECT job_id FROM skiplock.job_tags', params: [] }))
        .map((row) => row.job_id)
        .sort();
    expect(await beside()).toEqual([ratedFirst!, waiting!].sort());

    expect((await retry(db, failed!))?.job).toMatchObject({ status: 'queued', tags: ['failed', 'env=prod'] });
    expect(await beside()).toEqual([failed!, ratedFirst!, waiting!].sort());
    expect(await listedIds(db, { tags: ['failed'] })).toEqual([failed]);
  });

  it("merges a job definition's tags before the enqueue's own", async () => {
    const { db } = await open('pg');
    const report = defineJob('report', z.object({ n: z.number() }), async () => null, { tags: ['reports', 'team=a'] });
    const handle = await enqueue(db, report, { n: 1 }, { tags: ['team=a', 'monthly'] });
    expect(handle.job.tags).toEqual(['reports', 'team=a', 'monthly']);
    expect(() => defineJob('bad', z.object({}), async () => null, { tags: ['-x'] })).toThrow(/tags must be/);
  });

  it('refuses a bad tag, too many tags, and a payload match that is not an object, by name, storing nothing', async () => {
    const { db } = await open('pg');
    const refusal = (promise: Promise<unknown>) =>
      promise.then(
        () => undefined,
        (error: unknown) => error,
      );
    for (const tags of [['-starts-with-dash'], ['has space'], [''], ['x'.repeat(65)]]) {
      const error = await refusal(enqueue(db, { queue: 'q', tags }));
      expect(error).toBeInstanceOf(InvalidInputError);
      expect(error).toMatchObject({ field: 'jobs.0.tags.0' });
    }
    const many = Array.from({ length: 17 }, (_, index) => `t${index}`);
    expect(await refusal(enqueueBatch(db, [{ queue: 'q' }, { queue: 'q', tags: many }]))).toMatchObject({
      field: 'jobs.1.tags',
    });
    await expect(
      db.query({ text: `SELECT skiplock.enqueue('q', tags => ARRAY['ok', 'not ok'])`, params: [] }),
    ).rejects.toThrow(/^tags: a tag is/);
    expect((await listJobs(db, {})).jobs).toEqual([]);

    await expect(listJobs(db, { tags: ['bad tag'] })).rejects.toMatchObject({ field: 'tags.0' });
    for (const payload of [[1], 'text', null, 3]) {
      await expect(listJobs(db, { payload: payload as never })).rejects.toMatchObject({ field: 'payload' });
      await expect(bulkAction(db, { action: 'cancel', filter: { payload: payload as never } })).rejects.toMatchObject({
        field: 'filter.payload',
      });
    }
    await expect(bulkAction(db, { action: 'cancel', filter: { tags: ['a b'] } })).rejects.toMatchObject({
      field: 'filter.tags.0',
    });
    await expect(listJobs(db, { error: '' })).rejects.toMatchObject({ field: 'error' });
  });

  it.each(DRIVERS)(
    'lists by tags (all of them), by payload containment, and finished jobs by error text over %s',
    async (driver) => {
      const { db } = await open(driver);
      const [a, ab, b, none] = (
        await enqueueBatch(db, [
          { queue: 'q', tags: ['a'], payload: { customer: 42, plan: 'pro' } },
          { queue: 'q', tags: ['a', 'b'], payload: { customer: 42, plan: 'free' } },
          { queue: 'q', tags: ['b'], payload: { customer: 7 } },
          { queue: 'q', payload: { customer: 42, nested: { deep: true } } },
        ])
      ).map(({ job }) => job.id);
      expect(await listedIds(db, { tags: ['a'] })).toEqual([a, ab].sort());
      expect(await listedIds(db, { tags: ['b'] })).toEqual([ab, b].sort());
      expect(await listedIds(db, { tags: ['a', 'b'] })).toEqual([ab]);
      expect(await listedIds(db, { tags: ['c'] })).toEqual([]);
      expect(await listedIds(db, { payload: { customer: 42 } })).toEqual([a, ab, none].sort());
      expect(await listedIds(db, { payload: { nested: { deep: true } } })).toEqual([none]);
      expect(await listedIds(db, { payload: { customer: 42 }, tags: ['b'] })).toEqual([ab]);
      // An error search reads finished jobs only.
      expect(await listedIds(db, { error: 'x' })).toEqual([]);

      const [timedOut, refused] = (
        await enqueueBatch(db, [
          { queue: 'f', tags: ['a'], payload: { customer: 42 }, maxAttempts: 1 },
          { queue: 'g', tags: ['a'], maxAttempts: 1 },
        ])
      ).map(({ job }) => job.id);
      await finishAll(db, 'f', 'upstream Timeout after 30 s');
      await finishAll(db, 'g', 'card refused');
      expect(await listedIds(db, { error: 'timeout' })).toEqual([timedOut]);
      expect(await listedIds(db, { error: 'REFUSED', tags: ['a'] })).toEqual([refused]);
      expect(await listedIds(db, { tags: ['a'], status: 'failed' })).toEqual([timedOut, refused].sort());
      expect(await listedIds(db, { payload: { customer: 42 }, status: 'failed' })).toEqual([timedOut]);
      // A tenant scope still holds.
      expect(await listedIds(db, { tags: ['a'], tenant: 'other' })).toEqual([]);
    },
  );

  it('bulk actions take tags and a payload match, in the dry run and the action, live and finished', async () => {
    const { db } = await open('pg');
    await enqueueBatch(db, [
      { queue: 'q', tags: ['batch:7'], payload: { region: 'eu' } },
      { queue: 'q', tags: ['batch:7'], payload: { region: 'us' } },
      { queue: 'q', tags: ['batch:8'], payload: { region: 'eu' } },
    ]);
    const dry = await bulkAction(db, { action: 'cancel', filter: { tags: ['batch:7'] }, dryRun: true });
    expect(dry).toMatchObject({ matched: 2, changed: 0 });
    const cancelled = await bulkAction(db, {
      action: 'cancel',
      filter: { tags: ['batch:7'], payload: { region: 'eu' } },
    });
    expect(cancelled).toMatchObject({ matched: 1, changed: 1 });
    expect(await listedIds(db, { status: 'cancelled', tags: ['batch:7'] })).toHaveLength(1);

    // Finished jobs: the retry finds them by tag and payload, and they keep their tags.
    const retried = await bulkAction(db, { action: 'retry', filter: { tags: ['batch:7'], payload: { region: 'eu' } } });
    expect(retried).toMatchObject({ matched: 1, changed: 1 });
    const page = await listJobs(db, { tags: ['batch:7'], status: 'queued' });
    expect(page.jobs.map((job) => job.payload)).toEqual([{ region: 'us' }, { region: 'eu' }]);
  });
});
