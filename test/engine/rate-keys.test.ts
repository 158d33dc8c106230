import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { pgDb } from '../../src/db/pg';
import type { Db, Queryable } from '../../src/db/types';
import { defineJob } from '../../src/drain';
import {
  claimBatch,
  completeMany,
  enqueue,
  enqueueBatch,
  failMany,
  InvalidInputError,
  listKeys,
  type ClaimedJob,
  type EnqueueInput,
} from '../../src/engine';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();

async function states(db: Queryable): Promise<Record<string, string>> {
  const rows = await db.query<{ payload: string; state: string }>({
    text: `SELECT j.payload #>> '{}' AS payload, j.state FROM skiplock.all_jobs j ORDER BY j.id`,
    params: [],
  });
  return Object.fromEntries(rows.map((row) => [row.payload, row.state]));
}

const claimAll = (db: Queryable) => claimBatch(db, { max: 100, workerId: 'test', leaseSeconds: 60 });

const rated = (payload: string, fields: Partial<EnqueueInput> = {}): EnqueueInput => ({
  queue: 'calls',
  payload,
  rateKey: 'store:acme',
  rateLimit: 2,
  ratePeriodSeconds: 1,
  ...fields,
});

/** The most starts that fall in any window of `periodMs` (a start exactly periodMs after another is in the next). */
function busiestWindow(startedAt: readonly string[], periodMs: number): number {
  const times = startedAt.map((at) => Date.parse(at)).sort((a, b) => a - b);
  let busiest = 0;
  for (let last = 0, first = 0; last < times.length; last += 1) {
    while (times[last]! - times[first]! >= periodMs) first += 1;
    busiest = Math.max(busiest, last - first + 1);
  }
  return busiest;
}

/** Claims until `count` jobs have been claimed in all, completing each at once. */
async function claimUntil(db: Queryable, count: number): Promise<ClaimedJob[]> {
  const claimed: ClaimedJob[] = [];
  await expect
    .poll(
      async () => {
        const batch = await claimAll(db);
        await completeMany(db, batch);
        claimed.push(...batch);
        return claimed.length;
      },
      { interval: 50 },
    )
    .toBe(count);
  return claimed;
}

describe('rate keys', () => {
  it('starts at most the limit in any window; the excess waits held and starts as the window moves on', async () => {
    const { db } = await open('pg');
    await enqueueBatch(
      db,
      ['a', 'b', 'c', 'd', 'e'].map((payload) => rated(payload)),
    );
    expect(await states(db)).toEqual({ a: 'queued', b: 'queued', c: 'held', d: 'held', e: 'held' });

    const first = await claimAll(db);
    expect(first.map((job) => job.payload)).toEqual(['a', 'b']);
    expect(await claimAll(db)).toEqual([]);
    const [key] = (await listKeys(db)).keys;
    expect(key).toMatchObject({ key: 'store:acme', slots: null, held: 3 });
    expect(key!.rate).toMatchObject({ limit: 2, periodSeconds: 1, onExcess: 'throttle', startsInWindow: 2 });
    expect(Date.parse(key!.rate!.nextRoomAt!)).toBe(Date.parse(first[0]!.startedAt!) + 1000);
    await completeMany(db, first);

    const rest = await claimUntil(db, 3);
    expect(rest.map((job) => job.payload)).toEqual(['c', 'd', 'e']);
    expect(
      busiestWindow(
        [...first, ...rest].map((job) => job.startedAt!),
        1000,
      ),
    ).toBe(2);
  });

  it('says in the held job’s history why it waits', async () => {
    const { db } = await open('pg');
    const [, , third] = await enqueueBatch(
      db,
      ['a', 'b', 'c'].map((payload) => rated(payload)),
    );
    const events = await db.query<{ kind: string; detail: Record<string, unknown> }>({
      text: 'SELECT kind, detail FROM skiplock.job_events WHERE job_id = $1 ORDER BY id',
      params: [third!.job.id],
    });
    expect(events).toEqual([
      {
        kind: 'held',
        detail: { key: 'store:acme', blockedBy: null, reason: 'its key is at its rate limit (2 starts in 1 s)' },
      },
    ]);
  });

  it('counts every attempt: a retry beyond the limit is held until the window has room', async () => {
    const { db } = await open('pg');
    await enqueue(db, rated('a', { rateLimit: 1 }));
    const [first] = await claimAll(db);
    await failMany(db, [{ id: first!.id, leaseToken: first!.leaseToken, error: { message: 'x' }, retryInSeconds: 0 }]);
    expect(await claimAll(db)).toEqual([]);
    expect(await states(db)).toEqual({ a: 'held' });

    const [again] = await claimUntil(db, 1);
    expect(again!.attempts).toBe(2);
    expect(Date.parse(again!.startedAt!) - Date.parse(first!.startedAt!)).toBeGreaterThanOrEqual(1000);
  });

  it('drops the excess at enqueue: it ends cancelled, saying why, and the answer says so', async () => {
    const { db } = await open('pg');
    const results = await enqueueBatch(
      db,
      ['a', 'b', 'c'].map((payload) => rated(payload, { ratePeriodSeconds: 60, rateOnExcess: 'drop' })),
    );
    expect(results.map(({ job }) => job.status)).toEqual(['queued', 'queued', 'cancelled']);
    expect(results[2]!.job.lastError).toEqual({
      name: 'RateLimitedError',
      message: 'its key store:acme was at its rate limit (2 starts in 60 s)',
    });
    // The window counts starts and turns given: two started, one more is dropped too.
    await completeMany(db, await claimAll(db));
    const [late] = await enqueueBatch(db, [rated('d', { ratePeriodSeconds: 60, rateOnExcess: 'drop' })]);
    expect(late!.job.status).toBe('cancelled');

    const [fromSql] = await db.query<{ status: string }>({
      text: `SELECT skiplock.enqueue('calls', '"e"', rate_key => 'store:acme', rate_limit => 2,
                                     rate_period_seconds => 60, rate_on_excess => 'drop')->>'status' AS status`,
      params: [],
    });
    expect(fromSql!.status).toBe('cancelled');
  });

  it('takes the key from a job definition, the job type when it names none', async () => {
    const { db } = await open('pg');
    const perStore = defineJob('store-call', z.object({ store: z.string() }), async () => null, {
      rateLimit: { key: (payload) => `store:${payload.store}`, limit: 3, periodSeconds: 10 },
    });
    const perType = defineJob('email', z.object({ to: z.string() }), async () => null, {
      rateLimit: { limit: 100, periodSeconds: 60, onExcess: 'drop' },
    });
    await enqueue(db, perStore, { store: 'acme' });
    await enqueue(db, perType, { to: 'a@example.test' });
    const keys = (await listKeys(db)).keys.map(({ key, rate }) => ({ key, rate }));
    expect(keys).toEqual([
      { key: 'email', rate: expect.objectContaining({ limit: 100, periodSeconds: 60, onExcess: 'drop' }) },
      { key: 'store:acme', rate: expect.objectContaining({ limit: 3, periodSeconds: 10, onExcess: 'throttle' }) },
    ]);
    expect(() =>
      defineJob('bad', z.object({}), async () => null, { rateLimit: { limit: 0, periodSeconds: 0.5 } }),
    ).toThrow(/rateLimit.limit must be an integer from 1 to 10000; rateLimit.periodSeconds must be a whole number/);
  });

  it('refuses bad rate fields by name, storing nothing', async () => {
    const { db } = await open('pg');
    const cases: Array<[Partial<EnqueueInput>, string]> = [
      [{ rateKey: 'k', rateLimit: 1, ratePeriodSeconds: 1, concurrencyKey: 'c' }, 'jobs.0.rateKey'],
      [{ rateKey: 'k', rateLimit: 1, ratePeriodSeconds: 1, orderingKey: 'o' }, 'jobs.0.rateKey'],
      [{ rateKey: '', rateLimit: 1, ratePeriodSeconds: 1 }, 'jobs.0.rateKey'],
      [{ rateKey: 'x'.repeat(257), rateLimit: 1, ratePeriodSeconds: 1 }, 'jobs.0.rateKey'],
      [{ rateKey: 'k', rateLimit: 0, ratePeriodSeconds: 1 }, 'jobs.0.rateLimit'],
      [{ rateKey: 'k', rateLimit: 10_001, ratePeriodSeconds: 1 }, 'jobs.0.rateLimit'],
      [{ rateKey: 'k', ratePeriodSeconds: 1 }, 'jobs.0.rateLimit'],
      [{ rateKey: 'k', rateLimit: 1, ratePeriodSeconds: 0.5 }, 'jobs.0.ratePeriodSeconds'],
      [{ rateKey: 'k', rateLimit: 1 }, 'jobs.0.ratePeriodSeconds'],
      [{ rateKey: 'k', rateLimit: 1, ratePeriodSeconds: 1, rateOnExcess: 'wait' as 'drop' }, 'jobs.0.rateOnExcess'],
      [{ rateLimit: 1 }, 'jobs.0.rateLimit'],
      [{ rateOnExcess: 'drop' }, 'jobs.0.rateOnExcess'],
    ];
    for (const [fields, field] of cases) {
      const refusal = await enqueue(db, { queue: 'q', ...fields }).catch((error: unknown) => error);
      expect(refusal, JSON.stringify(fields)).toBeInstanceOf(InvalidInputError);
      expect((refusal as InvalidInputError).field).toBe(field);
    }
    // One key is one kind.
    await enqueue(db, { queue: 'q', payload: 'first', concurrencyKey: 'k' });
    const refusal = await enqueue(db, rated('second', { rateKey: 'k' })).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(InvalidInputError);
    expect((refusal as Error).message).toMatch(/^rateKey: k is in use as a concurrency key of tenant default/);
    expect(Object.keys(await states(db))).toEqual(['first']);
  });

  it('never exceeds the limit in any window with ten claimers at once, retries included, and loses no job', async () => {
    const { db, url } = await open('pg');
    const limit = 5;
    await enqueueBatch(
      db,
      Array.from({ length: 30 }, (_, n) => rated(String(n), { rateLimit: limit })),
    );
    const claimers: Db[] = Array.from({ length: 10 }, () => pgDb(url, { max: 1 }));
    const starts: string[] = [];
    const done = new Set<string>();
    await Promise.all(
      claimers.map(async (claimer, index) => {
        while (done.size < 30) {
          const claimed = await claimBatch(claimer, { max: 1 + (index % 4), workerId: `c${index}`, leaseSeconds: 60 });
          starts.push(...claimed.map((job) => job.startedAt!));
          // Every third job fails its first attempt and retries at once: its retry is a start too.
          const failing = claimed.filter((job) => job.attempts === 1 && Number(job.payload) % 3 === 0);
          await failMany(
            claimer,
            failing.map((job) => ({
              id: job.id,
              leaseToken: job.leaseToken,
              error: { message: 'x' },
              retryInSeconds: 0,
            })),
          );
          const { completed } = await completeMany(
            claimer,
            claimed.filter((job) => !failing.includes(job)),
          );
          for (const id of completed) done.add(id);
          if (claimed.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
        }
      }),
    );
    await Promise.all(claimers.map((claimer) => claimer.close()));
    expect(starts).toHaveLength(40);
    expect(busiestWindow(starts, 1000)).toBeLessThanOrEqual(limit);
    expect(new Set(Object.values(await states(db)))).toEqual(new Set(['succeeded']));
  });

  it("never waits for a key another transaction holds: that key's jobs wait for a later claim", async () => {
    const { db, url } = await open('pg');
    await enqueueBatch(db, [
      rated('a1', { rateKey: 'store:a', rateLimit: 10 }),
      rated('b1', { rateKey: 'store:b', rateLimit: 10 }),
      rated('a2', { rateKey: 'store:a', rateLimit: 10 }),
    ]);
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      // As a completion of store:a's jobs, or an enqueue not yet committed, holds its row.
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM skiplock.concurrency_keys WHERE key = 'store:a' FOR UPDATE`);
      const claimed = await claimAll(db);
      expect(claimed.map((job) => job.payload)).toEqual(['b1']);
      expect(await states(db)).toEqual({ a1: 'queued', b1: 'running', a2: 'queued' });
      await holder.query('COMMIT');
    } finally {
      await holder.end();
    }
    expect((await claimAll(db)).map((job) => job.payload).sort()).toEqual(['a1', 'a2']);
    const [key] = (await listKeys(db)).keys.filter((row) => row.key === 'store:a');
    expect(key?.rate?.startsInWindow).toBe(2);
  });

  it('drops the key once its last start has left the window', async () => {
    const { db } = await open('pg');
    await enqueue(db, rated('a'));
    await completeMany(db, await claimAll(db));
    expect((await listKeys(db)).keys).toHaveLength(1);
    await expect
      .poll(async () => {
        await claimAll(db);
        return (await listKeys(db)).keys.length;
      })
      .toBe(0);
  });

  it('runs a started job again after its key was dropped, counting it in a new window', async () => {
    const { db } = await open('pg');
    await enqueue(db, rated('a'));
    const [started] = await claimAll(db);
    // Its window empties while it runs, and the key goes: a started job holds nothing of it.
    await expect
      .poll(async () => {
        await claimAll(db);
        return (await listKeys(db)).keys.length;
      })
      .toBe(0);
    await failMany(db, [{ ...started!, error: { message: 'try again' }, retryInSeconds: 0 }]);
    const [retried] = await claimUntil(db, 1);
    expect(retried).toMatchObject({ payload: 'a', attempts: 2 });
    expect((await listKeys(db)).keys).toEqual([
      expect.objectContaining({ key: 'store:acme', rate: expect.objectContaining({ limit: 2, startsInWindow: 1 }) }),
    ]);
  });

  it("leaves its key's row unwritten when a started job ends and the key has more to run", async () => {
    const { db } = await open('pg');
    await enqueueBatch(db, [rated('a'), rated('b')]);
    const [first, second] = await claimAll(db);
    const version = () =>
      db.query<{ version: string; taken: number; starts: number }>({
        text: `SELECT c.xmin::text || ':' || c.ctid::text AS version, c.taken, cardinality(c.starts) AS starts
               FROM skiplock.concurrency_keys c WHERE c.key = 'store:acme'`,
        params: [],
      });
    const before = await version();
    expect(before).toEqual([{ version: expect.any(String), taken: 0, starts: 2 }]);
    await completeMany(db, [first!]);
    // The second job still runs, so the key stays, its window as it was.
    expect(await version()).toEqual(before);
    await completeMany(db, [second!]);
    expect((await listKeys(db)).keys).toHaveLength(1);
  });
});
