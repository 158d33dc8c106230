import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { pgDb } from '../../src/db/pg';
import type { Db, Queryable } from '../../src/db/types';
import { defineJob } from '../../src/drain';
import {
  cancel,
  claimBatch,
  completeMany,
  enqueue,
  enqueueBatch,
  failMany,
  InvalidInputError,
  listKeys,
  reschedule,
  retry,
  unblockKey,
  type ClaimedJob,
  type EnqueueInput,
} from '../../src/engine';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();

async function states(db: Queryable, tenant = 'default'): Promise<Record<string, string>> {
  const rows = await db.query<{ payload: string; state: string }>({
    text: `SELECT j.payload #>> '{}' AS payload, j.state FROM skiplock.all_jobs j WHERE j.tenant = $1 ORDER BY j.id`,
    params: [tenant],
  });
  return Object.fromEntries(rows.map((row) => [row.payload, row.state]));
}

async function claimAll(db: Queryable): Promise<ClaimedJob[]> {
  return claimBatch(db, { max: 100, workerId: 'test', leaseSeconds: 60 });
}

async function succeed(db: Queryable, jobs: readonly ClaimedJob[]): Promise<void> {
  const { stale } = await completeMany(db, jobs);
  expect(stale).toEqual([]);
}

async function failForGood(db: Queryable, jobs: readonly ClaimedJob[]): Promise<void> {
  await failMany(
    db,
    jobs.map((job) => ({ id: job.id, leaseToken: job.leaseToken, error: { message: 'no' }, forGood: true })),
  );
}

const payloads = (jobs: readonly ClaimedJob[]) => jobs.map((job) => job.payload).sort();

/**
 * Ten claimers over their own connections claim (max 1 to 5) until nothing
 * is claimable for a while; each claimed job is passed to `seen`, and a first
 * attempt whose payload's number (`key/n`) `failsFirst` picks fails and
 * retries at once; the rest complete. Returns the completions per job id.
 */
async function race(
  url: string,
  failsFirst: (n: number) => boolean,
  seen: (job: ClaimedJob) => void = () => {},
): Promise<Map<string, number>> {
  const claimers: Db[] = Array.from({ length: 10 }, () => pgDb(url, { max: 1 }));
  const completions = new Map<string, number>();
  const numberOf = (job: ClaimedJob) => Number((job.payload as string).split('/')[1]);
  await Promise.all(
    claimers.map(async (db, index) => {
      let idle = 0;
      while (idle < 20) {
        const claimed = await claimBatch(db, { max: 1 + (index % 5), workerId: `c${index}`, leaseSeconds: 60 });
        if (claimed.length === 0) {
          idle += 1;
          await new Promise((resolve) => setTimeout(resolve, 10));
          continue;
        }
        idle = 0;
        claimed.forEach(seen);
        const failing = claimed.filter((job) => job.attempts === 1 && failsFirst(numberOf(job)));
        await failMany(
          db,
          failing.map((job) => ({
            id: job.id,
            leaseToken: job.leaseToken,
            error: { message: 'x' },
            retryInSeconds: 0,
          })),
        );
        const { completed } = await completeMany(
          db,
          claimed.filter((job) => !failing.includes(job)),
        );
        for (const id of completed) completions.set(id, (completions.get(id) ?? 0) + 1);
      }
    }),
  );
  await Promise.all(claimers.map((db) => db.close()));
  return completions;
}

describe('concurrency keys', () => {
  it('lets at most the limit of a key past its turn; the rest wait held and take freed slots in enqueue order', async () => {
    const { db } = await open('pg');
    const keyed = (n: string): EnqueueInput => ({
      queue: 'sync',
      payload: n,
      concurrencyKey: 'acct-1',
      concurrencyLimit: 2,
    });
    await enqueueBatch(db, ['a', 'b', 'c', 'd'].map(keyed));
    await enqueue(db, { queue: 'sync', payload: 'other', concurrencyKey: 'acct-2' });
    expect(await states(db)).toEqual({ a: 'queued', b: 'queued', c: 'held', d: 'held', other: 'queued' });

    const first = await claimAll(db);
    expect(payloads(first)).toEqual(['a', 'b', 'other']);
    expect(await claimAll(db)).toEqual([]);
    // A retry keeps its slot: the job is still past its turn.
    await failMany(db, [
      { id: first[0]!.id, leaseToken: first[0]!.leaseToken, error: { message: 'x' }, retryInSeconds: 0 },
    ]);
    expect((await states(db)).c).toBe('held');

    await succeed(db, first.slice(1));
    const [key] = (await listKeys(db)).keys;
    expect(key).toMatchObject({ tenant: 'default', key: 'acct-1', ordered: false, slots: 2, taken: 2, held: 1 });
    expect(payloads(await claimAll(db))).toEqual(['a', 'c']);
    // acct-2's key had nothing left, so it was dropped.
    expect((await listKeys(db)).keys.map((k) => k.key)).toEqual(['acct-1']);
  });

  it('counts keys per tenant', async () => {
    const { db } = await open('pg');
    await enqueue(db, { queue: 'sync', tenant: 'one', payload: 'x', concurrencyKey: 'k' });
    await enqueue(db, { queue: 'sync', tenant: 'two', payload: 'y', concurrencyKey: 'k' });
    expect(payloads(await claimAll(db))).toEqual(['x', 'y']);
  });

  it('records why a held job waits in its history', async () => {
    const { db } = await open('pg');
    await enqueue(db, { queue: 'sync', payload: 'a', concurrencyKey: 'k' });
    const { job } = await enqueue(db, { queue: 'sync', payload: 'b', concurrencyKey: 'k' });
    await succeed(db, await claimAll(db));
    const events = await db.query<{ kind: string; detail: Record<string, unknown> }>({
      text: 'SELECT kind, detail FROM skiplock.job_events WHERE job_id = $1 ORDER BY id',
      params: [job.id],
    });
    // Its turn shows as its claim; only the wait has an event of its own.
    expect(events).toEqual([
      { kind: 'held', detail: { key: 'k', reason: 'its key has no free slot', blockedBy: null } },
    ]);
  });

  it('gives a cancelled held job no slot back, and a cancelled waiting one its slot to the next', async () => {
    const { db } = await open('pg');
    const [a, b, c] = await enqueueBatch(
      db,
      ['a', 'b', 'c'].map((payload) => ({ queue: 'sync', payload, concurrencyKey: 'k' })),
    );
    // Rescheduled, a held job keeps waiting for its turn.
    expect((await reschedule(db, b!.job.id, { priority: 5, delaySeconds: 0 }))?.outcome).toBe('rescheduled');
    expect((await states(db)).b).toBe('held');
    expect((await cancel(db, b!.job.id))?.outcome).toBe('cancelled');
    expect(await states(db)).toEqual({ a: 'queued', b: 'cancelled', c: 'held' });
    await cancel(db, a!.job.id);
    expect(await states(db)).toEqual({ a: 'cancelled', b: 'cancelled', c: 'queued' });
    expect(payloads(await claimAll(db))).toEqual(['c']);
    expect(c).toBeDefined();
  });

  it('takes the key again when a finished job is retried', async () => {
    const { db } = await open('pg');
    const { job } = await enqueue(db, { queue: 'sync', payload: 'a', concurrencyKey: 'k' });
    await failForGood(db, await claimAll(db));
    await enqueue(db, { queue: 'sync', payload: 'b', concurrencyKey: 'k' });
    expect((await retry(db, job.id))?.retried).toBe(true);
    expect(await states(db)).toEqual({ a: 'held', b: 'queued' });
  });

  it('refuses bad keys by name, storing nothing', async () => {
    const { db } = await open('pg');
    const cases: Array<[Partial<EnqueueInput>, string]> = [
      [{ concurrencyKey: 'a', orderingKey: 'b' }, 'jobs.0.orderingKey'],
      [{ concurrencyKey: '' }, 'jobs.0.concurrencyKey'],
      [{ orderingKey: 'x'.repeat(257) }, 'jobs.0.orderingKey'],
      [{ concurrencyKey: 'a', concurrencyLimit: 0 }, 'jobs.0.concurrencyLimit'],
      [{ concurrencyKey: 'a', concurrencyLimit: 1.5 }, 'jobs.0.concurrencyLimit'],
      [{ concurrencyLimit: 2 }, 'jobs.0.concurrencyLimit'],
      [{ orderingOnFailure: 'hold' }, 'jobs.0.orderingOnFailure'],
      [{ orderingKey: 'a', orderingOnFailure: 'skip' as 'hold' }, 'jobs.0.orderingOnFailure'],
    ];
    for (const [fields, field] of cases) {
      const refusal = await enqueue(db, { queue: 'q', ...fields }).catch((error: unknown) => error);
      expect(refusal, JSON.stringify(fields)).toBeInstanceOf(InvalidInputError);
      expect((refusal as InvalidInputError).field).toBe(field);
    }
    // One key is one kind.
    await enqueue(db, { queue: 'q', payload: 'first', orderingKey: 'k' });
    const refusal = await enqueue(db, { queue: 'q', concurrencyKey: 'k' }).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(InvalidInputError);
    expect((refusal as Error).message).toMatch(/^concurrencyKey: k is in use as an ordering key of tenant default/);
    expect(Object.keys(await states(db))).toEqual(['first']);
  });

  it('takes the key from a job definition, the enqueue options winning', async () => {
    const { db } = await open('pg');
    const sync = defineJob('sync', z.object({ account: z.string() }), () => null, {
      concurrency: { key: (payload) => `account:${payload.account}`, limit: 1 },
    });
    await enqueueBatch(db, sync, [{ account: 'a' }, { account: 'a' }, { account: 'b' }]);
    await enqueue(db, sync, { account: 'a' }, { concurrencyKey: 'own' });
    const { keys } = await listKeys(db);
    expect(keys.map(({ key, taken, held }) => ({ key, taken, held }))).toEqual([
      { key: 'account:a', taken: 1, held: 1 },
      { key: 'account:b', taken: 1, held: 0 },
      { key: 'own', taken: 1, held: 0 },
    ]);
    const failing = defineJob('failing', z.object({}), () => null, {
      concurrency: {
        key: () => {
          throw new Error('no account');
        },
      },
    });
    await expect(enqueue(db, failing, {})).rejects.toThrow(
      'failing: its key function failed on this payload: no account',
    );
    expect(() =>
      defineJob('both', z.object({}), () => null, { concurrency: { key: () => 'a' }, ordering: { key: () => 'b' } }),
    ).toThrow('give one of concurrency, ordering and rateLimit');
  });

  it('holds every key to its limit with 10 claimers racing over real connections, retries and all', async () => {
    const { db: setup, url } = await open('pg', 2);
    const limits: Record<string, number> = {};
    const jobs: EnqueueInput[] = [];
    for (let k = 0; k < 40; k++) {
      const key = `key-${k}`;
      limits[key] = 1 + (k % 3);
      for (let n = 0; n < 30; n++) {
        jobs.push({
          queue: 'work',
          tenant: `t${k % 2}`,
          payload: `${key}/${n}`,
          concurrencyKey: key,
          concurrencyLimit: limits[key],
        });
      }
    }
    // Interleaved, as traffic arrives, in runs of three per key: a claim of several jobs then meets a key
    // with free slots more than once, so its limit is reached however the claimers happen to be scheduled.
    const run = (job: EnqueueInput) => Math.floor(Number((job.payload as string).split('/')[1]) / 3);
    jobs.sort((a, b) => run(a) - run(b));
    for (let i = 0; i < jobs.length; i += 400) await enqueueBatch(setup, jobs.slice(i, i + 400));

    const sampler = pgDb(url, { max: 1 });
    let peakOver = 0;
    let samples = 0;
    let draining = true;
    const sampling = (async () => {
      while (draining) {
        const rows = await sampler.query<{ key: string; running: number }>({
          text: `SELECT kj.key, count(*)::integer AS running FROM skiplock.jobs j
                 JOIN skiplock.keyed_jobs kj ON kj.job_id = j.id WHERE j.state = 'running' GROUP BY kj.tenant, kj.key`,
          params: [],
        });
        samples += 1;
        for (const { key, running } of rows) peakOver = Math.max(peakOver, running - limits[key]!);
      }
    })();
    const completions = await race(url, (n) => n % 3 === 0);
    draining = false;
    await sampling;
    await sampler.close();

    expect(completions.size).toBe(jobs.length);
    expect([...completions.values()].every((count) => count === 1)).toBe(true);
    expect(samples).toBeGreaterThan(10);
    expect(peakOver).toBeLessThanOrEqual(0);
    // From the history: at no instant did a key hold more attempts than its slots.
    const over = await setup.query<{ key: string; peak: number }>({
      text: `WITH runs AS (
               SELECT kj.key, f.started_at AS at, 1 AS delta FROM skiplock.finished_jobs f JOIN skiplock.keyed_jobs kj ON kj.job_id = f.id
               UNION ALL
               SELECT kj.key, f.finished_at, -1 FROM skiplock.finished_jobs f JOIN skiplock.keyed_jobs kj ON kj.job_id = f.id)
             SELECT key, max(running)::integer AS peak FROM (
               SELECT key, sum(delta) OVER (PARTITION BY key ORDER BY at, delta) AS running FROM runs) s GROUP BY key`,
      params: [],
    });
    expect(over.filter(({ key, peak }) => peak > limits[key]!)).toEqual([]);
    // Keys did run several jobs at once: the limits were reached, not merely never tested.
    expect(over.some(({ key, peak }) => limits[key]! > 1 && peak > 1)).toBe(true);
    // A key left behind once every job is done: its jobs' rows say how it was left.
    const leftover = (await listKeys(setup)).keys;
    const leftoverJobs = await setup.query({
      text: 'SELECT * FROM skiplock.keyed_jobs WHERE key = ANY ($1)',
      params: [leftover.map((key) => key.key)],
    });
    expect(leftover, JSON.stringify(leftoverJobs)).toEqual([]);
  });
});

describe('ordering keys', () => {
  it('runs one job of a key at a time in enqueue order; a retrying head keeps its place', async () => {
    const { db } = await open('pg');
    await enqueueBatch(
      db,
      ['1', '2', '3'].map((payload) => ({ queue: 'hooks', payload, orderingKey: 'order-42' })),
    );
    await enqueue(db, { queue: 'hooks', payload: '4', orderingKey: 'order-42' });
    expect(await states(db)).toEqual({ 1: 'queued', 2: 'held', 3: 'held', 4: 'held' });
    const [head] = await claimAll(db);
    await failMany(db, [{ id: head!.id, leaseToken: head!.leaseToken, error: { message: 'x' }, retryInSeconds: 0 }]);
    expect(payloads(await claimAll(db))).toEqual(['1']);
    const seen: string[] = ['1'];
    await succeed(db, [
      (
        await db.query<ClaimedJob>({
          text: 'SELECT id, lease_token AS "leaseToken" FROM skiplock.jobs WHERE state = \'running\'',
          params: [],
        })
      )[0]!,
    ]);
    for (;;) {
      const claimed = await claimAll(db);
      if (claimed.length === 0) break;
      expect(claimed).toHaveLength(1);
      seen.push(claimed[0]!.payload as string);
      await succeed(db, claimed);
    }
    expect(seen).toEqual(['1', '2', '3', '4']);
  });

  it('holds the key when its head fails for good, until the head is retried or the key unblocked', async () => {
    const { db } = await open('pg');
    const [head] = await enqueueBatch(
      db,
      ['1', '2', '3'].map((payload) => ({ queue: 'hooks', payload, orderingKey: 'o' })),
    );
    await failForGood(db, await claimAll(db));
    expect(await claimAll(db)).toEqual([]);
    const [blocked] = (await listKeys(db, { blocked: true })).keys;
    expect(blocked).toMatchObject({ key: 'o', ordered: true, blockedBy: head!.job.id, held: 2, taken: 0 });
    expect(blocked!.blockedAt).not.toBeNull();
    // A new job of the key waits behind the hold too.
    await enqueue(db, { queue: 'hooks', payload: '4', orderingKey: 'o' });
    expect((await states(db))['4']).toBe('held');

    // Retried, the head runs first, then the rest in order.
    await retry(db, head!.job.id);
    const retried = await claimAll(db);
    expect(payloads(retried)).toEqual(['1']);
    await succeed(db, retried);
    expect(payloads(await claimAll(db))).toEqual(['2']);
  });

  it('lets the next job run when the key is unblocked, or at once with onFailure continue', async () => {
    const { db } = await open('pg');
    await enqueueBatch(
      db,
      ['1', '2'].map((payload) => ({ queue: 'hooks', payload, orderingKey: 'held' })),
    );
    await enqueueBatch(
      db,
      ['a', 'b'].map((payload) => ({
        queue: 'hooks',
        payload,
        orderingKey: 'goes-on',
        orderingOnFailure: 'continue' as const,
      })),
    );
    await failForGood(db, await claimAll(db));
    expect(payloads(await claimAll(db))).toEqual(['b']);
    expect(await unblockKey(db, 'goes-on', { tenant: 'default' })).toBe(false);
    expect(await unblockKey(db, 'held', { tenant: 'other' })).toBe(false);
    expect(await unblockKey(db, 'held', { tenant: 'default' })).toBe(true);
    expect(payloads(await claimAll(db))).toEqual(['2']);
  });

  it('keeps enqueue order per key with 10 claimers racing and failed first attempts', async () => {
    const { db: setup, url } = await open('pg', 2);
    const keys = 8;
    const perKey = 25;
    for (let n = 0; n < perKey; n++) {
      await enqueueBatch(
        setup,
        Array.from({ length: keys }, (_, k) => ({ queue: 'hooks', payload: `${k}/${n}`, orderingKey: `order-${k}` })),
      );
    }
    const starts: Array<{ key: string; n: number }> = [];
    await race(
      url,
      (n) => n % 4 === 1,
      (job) => {
        const [key, n] = (job.payload as string).split('/');
        starts.push({ key: key!, n: Number(n) });
      },
    );
    for (let k = 0; k < keys; k++) {
      const order = starts.filter((start) => start.key === `${k}`).map((start) => start.n);
      // Each job starts after the one before it ended: first attempts in order, a retry right after its failure.
      const expected = Array.from({ length: perKey }, (_, n) => (n % 4 === 1 ? [n, n] : [n])).flat();
      expect(order, `key ${k}`).toEqual(expected);
    }
    const [{ overlaps }] = (await setup.query<{ overlaps: number }>({
      text: `SELECT count(*)::integer AS overlaps FROM (
               SELECT f.started_at, lag(f.finished_at) OVER (PARTITION BY kj.key ORDER BY f.id) AS before
               FROM skiplock.finished_jobs f JOIN skiplock.keyed_jobs kj ON kj.job_id = f.id) s
             WHERE s.started_at < s.before`,
      params: [],
    })) as [{ overlaps: number }];
    expect(overlaps).toBe(0);
  });
});
