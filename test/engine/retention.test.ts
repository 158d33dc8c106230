import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/types';
import { createRegistry } from '../../src/drain/registry';
import { defineJob } from '../../src/drain/define-job';
import { syncJobTypeRetentions } from '../../src/drain/job-type-retentions';
import {
  claimBatch,
  complete,
  enqueue,
  fail,
  getJob,
  getQueue,
  handBackJobTypeRetention,
  InvalidInputError,
  listJobTypeRetentions,
  maintainHistory,
  setJobTypeRetention,
  setQueue,
} from '../../src/engine';
import { DRIVERS } from '../support/drivers';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();
const WEEK = 7 * 24 * 3600;

/** Runs one job of `queue` (and `type`) to its end, `agoSeconds` in the past as far as the history knows. */
async function finishJob(
  db: Db,
  options: {
    queue: string;
    type?: string;
    outcome?: 'succeeded' | 'failed';
    agoSeconds: number;
    dedupKey?: string;
    orderingKey?: string;
  },
): Promise<string> {
  const { job } = await enqueue(db, {
    queue: options.queue,
    ...(options.type === undefined ? {} : { type: options.type }),
    ...(options.dedupKey === undefined ? {} : { dedupKey: options.dedupKey, dedupWindowSeconds: 30 * 24 * 3600 }),
    ...(options.orderingKey === undefined ? {} : { orderingKey: options.orderingKey }),
  });
  const [claimed] = await claimBatch(db, { max: 1, workerId: 'w', queues: [options.queue] });
  expect(claimed!.id).toBe(job.id);
  if (options.outcome === 'failed') await fail(db, { ...claimed!, error: { message: 'no' }, forGood: true });
  else await complete(db, claimed!);
  await db.query({
    text: 'UPDATE skiplock.finished_jobs SET finished_at = now() - make_interval(secs => $2) WHERE id = $1',
    params: [job.id, options.agoSeconds],
  });
  return job.id;
}

/** As if the hourly statistics had summed everything up to `agoSeconds` ago: pruning never passes them. */
async function rollUpTo(db: Db, agoSeconds = 0): Promise<void> {
  await db.query({
    text: 'UPDATE skiplock.attempt_stats_rollup SET rolled_through = now() - make_interval(secs => $1)',
    params: [agoSeconds],
  });
}

async function kept(db: Db, ids: Record<string, string>): Promise<string[]> {
  const names: string[] = [];
  for (const [name, id] of Object.entries(ids)) if ((await getJob(db, id)) !== undefined) names.push(name);
  return names.sort();
}

describe('retention per queue and per job type', () => {
  it('keeps a queue retention, "none" and the default, and refuses one under a minute by name, changing nothing', async () => {
    const { db } = await open('pg');
    expect(await getQueue(db, 'audit')).toMatchObject({ retentionSeconds: null, custom: false });
    await setQueue(db, 'audit', { concurrency: null, weight: 1, retentionSeconds: 90 * 24 * 3600 });
    expect(await getQueue(db, 'audit')).toMatchObject({ retentionSeconds: 90 * 24 * 3600, custom: true });
    await setQueue(db, 'pings', { concurrency: 5, weight: 1, retentionSeconds: 'none' });
    expect(await getQueue(db, 'pings')).toMatchObject({ retentionSeconds: 'none', concurrency: 5 });

    for (const bad of [59, 0, -1, 60.5, 'forever']) {
      const refused = setQueue(db, 'audit', { concurrency: 3, weight: 2, retentionSeconds: bad as never });
      await expect(refused).rejects.toBeInstanceOf(InvalidInputError);
      await expect(refused).rejects.toMatchObject({ field: 'retentionSeconds' });
    }
    // Nothing changed, not even the settings given beside it.
    expect(await getQueue(db, 'audit')).toMatchObject({
      retentionSeconds: 90 * 24 * 3600,
      concurrency: null,
      weight: 1,
    });
    // The database refuses it too, whoever writes it.
    await expect(
      db.query({ text: "UPDATE skiplock.queues SET retention_seconds = 30 WHERE name = 'audit'", params: [] }),
    ).rejects.toThrow(/queues_retention_none_or_a_minute/);
    // Left out, a PUT's retention is the default again.
    await setQueue(db, 'audit', { concurrency: null, weight: 1 });
    expect(await getQueue(db, 'audit')).toMatchObject({ retentionSeconds: null });
  });

  it("prunes each finished job by its type's retention, else its queue's, else the default, and no other", async () => {
    const { db } = await open('pg');
    await setQueue(db, 'hourly', { concurrency: null, weight: 1, retentionSeconds: 3600 });
    await setQueue(db, 'trivial', { concurrency: null, weight: 1, retentionSeconds: 'none' });
    await setQueue(db, 'audit', { concurrency: null, weight: 1, retentionSeconds: 30 * 24 * 3600 });
    await syncJobTypeRetentions(
      db,
      createRegistry([defineJob('ping', z.object({}), () => null, { retentionSeconds: 'none' })]),
    );
    const hour = 3600;
    const ids = {
      defaultRecent: await finishJob(db, { queue: 'plain', agoSeconds: 2 * hour }),
      defaultOld: await finishJob(db, { queue: 'plain', agoSeconds: 8 * 24 * hour }),
      hourlyRecent: await finishJob(db, { queue: 'hourly', agoSeconds: 600 }),
      hourlyOld: await finishJob(db, { queue: 'hourly', agoSeconds: 2 * hour }),
      hourlyOldFailed: await finishJob(db, { queue: 'hourly', agoSeconds: 2 * hour, outcome: 'failed' }),
      // Failed for good at the head of its ordering key: the key's later jobs wait on it, so it stays.
      hourlyHeldHead: await finishJob(db, {
        queue: 'hourly',
        agoSeconds: 2 * hour,
        outcome: 'failed',
        orderingKey: 'acct-1',
      }),
      trivialSucceeded: await finishJob(db, { queue: 'trivial', agoSeconds: 600 }),
      trivialFailed: await finishJob(db, { queue: 'trivial', agoSeconds: 600, outcome: 'failed' }),
      // Its dedup key still matches for a month: the job stays while it does.
      trivialDeduplicating: await finishJob(db, { queue: 'trivial', agoSeconds: 600, dedupKey: 'once' }),
      auditOld: await finishJob(db, { queue: 'audit', agoSeconds: 8 * 24 * hour }),
      // The type's "none" wins over the queue's month; its failure is kept for the queue's month.
      pingInAudit: await finishJob(db, { queue: 'audit', type: 'ping', agoSeconds: 600 }),
      pingInAuditFailed: await finishJob(db, {
        queue: 'audit',
        type: 'ping',
        agoSeconds: 8 * 24 * hour,
        outcome: 'failed',
      }),
    };
    const live = (await enqueue(db, { queue: 'trivial' })).job.id;
    const heldBehind = (await enqueue(db, { queue: 'hourly', orderingKey: 'acct-1' })).job.id;

    // Nothing goes before the statistics have summed it.
    await rollUpTo(db, 9 * 24 * hour);
    expect(await maintainHistory(db, { retentionSeconds: WEEK })).toMatchObject({ deletedJobs: 0 });
    await rollUpTo(db);
    expect(await maintainHistory(db, { retentionSeconds: WEEK })).toMatchObject({ droppedDays: 0, deletedJobs: 5 });
    expect(await kept(db, ids)).toEqual(
      [
        'defaultRecent',
        'hourlyRecent',
        'hourlyHeldHead',
        'trivialFailed',
        'trivialDeduplicating',
        'auditOld',
        'pingInAuditFailed',
      ].sort(),
    );
    expect(await getJob(db, live)).toMatchObject({ status: 'queued' });
    expect(await getJob(db, heldBehind)).toMatchObject({ status: 'queued' });
    // The sweeps remember how far they went: the next round finds nothing to look at again.
    expect(await maintainHistory(db, { retentionSeconds: WEEK })).toMatchObject({ deletedJobs: 0 });

    // A changed retention applies to the jobs already finished: every sweep starts over.
    await setQueue(db, 'audit', { concurrency: null, weight: 1, retentionSeconds: 3600 });
    await rollUpTo(db);
    expect(await maintainHistory(db, { retentionSeconds: WEEK })).toMatchObject({ deletedJobs: 2 });
    expect(await kept(db, ids)).toEqual(
      ['defaultRecent', 'hourlyRecent', 'hourlyHeldHead', 'trivialFailed', 'trivialDeduplicating'].sort(),
    );
  });

  it('sweeps in bounded batches, carrying on where the last one stopped', async () => {
    const { db } = await open('pg');
    await setQueue(db, 'trivial', { concurrency: null, weight: 1, retentionSeconds: 'none' });
    const ids: string[] = [];
    // One job a minute, for half an hour, two hours ago.
    for (let minute = 0; minute < 30; minute++) {
      ids.push(await finishJob(db, { queue: 'trivial', agoSeconds: 2 * 3600 - minute * 60 }));
    }
    await rollUpTo(db);
    const sweep = async () =>
      (
        await db.query<{ deleted: number }>({
          text: "SELECT skiplock.sweep_finished_jobs(interval '7 days', interval '7 days', 10) AS deleted",
          params: [],
        })
      )[0]!.deleted;
    expect([await sweep(), await sweep(), await sweep(), await sweep()]).toEqual([10, 10, 10, 0]);
    for (const id of ids) expect(await getJob(db, id)).toBeUndefined();
  });
});

describe.each(DRIVERS)("a job type's retention over %s", (driver) => {
  it("takes a type's retention from its definition, writes only changes, and clears one taken out", async () => {
    const { db } = await open(driver);
    const retentions = async () =>
      db.query<{ type: string; retention_seconds: number | null }>({
        text: 'SELECT type, retention_seconds FROM skiplock.job_types ORDER BY type',
        params: [],
      });
    const plain = defineJob('plain', z.object({}), () => null);
    const registry = createRegistry([
      defineJob('ping', z.object({}), () => null, { retentionSeconds: 'none' }),
      defineJob('report', z.object({}), () => null, { retentionSeconds: 86_400 }),
      plain,
    ]);
    await syncJobTypeRetentions(db, registry);
    const updatedAt = async () =>
      db.query({ text: 'SELECT type, updated_at FROM skiplock.job_types ORDER BY type', params: [] });
    const before = await updatedAt();
    // The same definitions again write nothing.
    await syncJobTypeRetentions(db, registry);
    expect(await updatedAt()).toEqual(before);
    // A type without a retention of its own gets no row.
    expect(await retentions()).toEqual([
      { type: 'ping', retention_seconds: 0 },
      { type: 'report', retention_seconds: 86_400 },
    ]);
    await syncJobTypeRetentions(db, createRegistry([defineJob('ping', z.object({}), () => null), plain]));
    expect(await retentions()).toEqual([
      { type: 'ping', retention_seconds: null },
      // A type this drain does not run keeps what its own drains wrote.
      { type: 'report', retention_seconds: 86_400 },
    ]);

    expect(() => defineJob('tiny', z.object({}), () => null, { retentionSeconds: 30 })).toThrow(
      'job type "tiny": retentionSeconds must be whole seconds from 60 (at most ten years), or "none"',
    );
  });
  it("keeps an operator's retention for a type across the drains until it is handed back to the definition", async () => {
    const { db } = await open(driver);
    const registry = createRegistry([defineJob('digest', z.object({}), () => null, { retentionSeconds: 86_400 })]);
    await syncJobTypeRetentions(db, registry);
    expect(await listJobTypeRetentions(db)).toMatchObject([
      { type: 'digest', retentionSeconds: 86_400, setBy: 'definition' },
    ]);

    expect(await setJobTypeRetention(db, 'digest', 'none')).toMatchObject({
      retentionSeconds: 'none',
      setBy: 'operator',
    });
    // A type no drain defines yet may be set too.
    expect(await setJobTypeRetention(db, 'pull-only', 3600)).toMatchObject({
      retentionSeconds: 3600,
      setBy: 'operator',
    });
    // The drains that define the type leave the operator's choice alone.
    await syncJobTypeRetentions(db, registry);
    await syncJobTypeRetentions(db, createRegistry([defineJob('digest', z.object({}), () => null)]));
    expect(await listJobTypeRetentions(db)).toMatchObject([
      { type: 'digest', retentionSeconds: 'none', setBy: 'operator' },
      { type: 'pull-only', retentionSeconds: 3600, setBy: 'operator' },
    ]);

    for (const bad of [30, 0, -5, 1.5, '3600', 400_000_000]) {
      await expect(setJobTypeRetention(db, 'digest', bad as never)).rejects.toMatchObject({
        field: 'retentionSeconds',
      });
    }
    await expect(setJobTypeRetention(db, 'x'.repeat(129), 3600)).rejects.toMatchObject({ field: 'type' });
    expect(await listJobTypeRetentions(db)).toMatchObject([
      { type: 'digest', retentionSeconds: 'none' },
      { type: 'pull-only', retentionSeconds: 3600 },
    ]);

    // Handed back: cleared now, and the next drain that defines it writes its definition's.
    expect(await handBackJobTypeRetention(db, 'digest')).toMatchObject({ retentionSeconds: null, setBy: 'definition' });
    await syncJobTypeRetentions(db, registry);
    expect((await listJobTypeRetentions(db))[0]).toMatchObject({ retentionSeconds: 86_400, setBy: 'definition' });
  });
});
