import { describe, expect, it } from 'vitest';
import { pgDb } from '../../src/db/pg';
import type { Db, Queryable } from '../../src/db/types';
import {
  cancel,
  claimBatch,
  completeMany,
  enqueue,
  enqueueBatch,
  failMany,
  getJob,
  getJobEvents,
  getQueue,
  InvalidInputError,
  setQueue,
  type EnqueueInput,
} from '../../src/engine';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();

/**
 * Every start as the claim made it (a retry overwrites the job's started_at):
 * a trigger in the test's database notes each one in the claim's transaction.
 */
const NOTE_STARTS_SQL = /* sql */ `
CREATE TABLE starts (job_id uuid NOT NULL, queue text NOT NULL, attempt integer NOT NULL, started_at timestamptz NOT NULL);
CREATE FUNCTION note_start() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.starts VALUES (NEW.id, NEW.queue, NEW.attempts, NEW.started_at);
  RETURN NULL;
END
$$;
CREATE TRIGGER jobs_note_start AFTER UPDATE OF state ON skiplock.jobs
  FOR EACH ROW WHEN (NEW.state = 'running' AND OLD.state IS DISTINCT FROM 'running') EXECUTE FUNCTION note_start();`;

/** For every start of the queue, its starts in the window that ends with it, (t - period, t]; the busiest. */
const busiestWindowSql = /* sql */ `
SELECT coalesce(max(w.n), 0)::integer AS busiest, count(*)::integer AS starts,
       extract(epoch FROM max(s.started_at) - min(s.started_at))::float8 AS "spanSeconds"
FROM starts s CROSS JOIN LATERAL (
  SELECT count(*) AS n FROM starts o
  WHERE o.queue = s.queue AND o.started_at > s.started_at - make_interval(secs => $2) AND o.started_at <= s.started_at
) w
WHERE s.queue = $1`;

async function busiestWindow(db: Queryable, queue: string, periodSeconds: number) {
  const [row] = await db.query<{ busiest: number; starts: number; spanSeconds: number }>({
    text: busiestWindowSql,
    params: [queue, periodSeconds],
  });
  return row!;
}

/**
 * Eight claimers over their own connections claim (max 1 to 4) until none
 * has claimed anything for a second; a first attempt whose payload
 * `failsFirst` fails and retries at once, the rest complete. Returns the
 * completions per job id.
 */
async function race(url: string, failsFirst: (payload: number) => boolean): Promise<Map<string, number>> {
  const claimers: Db[] = Array.from({ length: 8 }, () => pgDb(url, { max: 1 }));
  const completions = new Map<string, number>();
  let lastClaimAt = Date.now();
  await Promise.all(
    claimers.map(async (db, index) => {
      while (Date.now() - lastClaimAt < 1500) {
        const claimed = await claimBatch(db, { max: 1 + (index % 4), workerId: `c${index}`, leaseSeconds: 60 });
        if (claimed.length === 0) {
          await new Promise((resolve) => setTimeout(resolve, 10));
          continue;
        }
        lastClaimAt = Date.now();
        const failing = claimed.filter((job) => job.attempts === 1 && failsFirst(job.payload as number));
        await failMany(
          db,
          failing.map(({ id, leaseToken }) => ({ id, leaseToken, error: { message: 'x' }, retryInSeconds: 0 })),
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

describe('a queue rate limit', () => {
  it('starts at most N of the queue in any window over all tenants, 8 claimers racing, retries counted', {
    timeout: 60_000,
  }, async () => {
    const { db, url } = await open('pg', 2);
    await db.query({ text: NOTE_STARTS_SQL, params: [] });
    await setQueue(db, 'api', { concurrency: null, weight: 1, rateLimit: { count: 6, perSeconds: 1 } });
    // 30 jobs of three tenants, one in five failing its first attempt (6 retries): 36 starts, six windows' worth.
    const jobs: EnqueueInput[] = Array.from({ length: 30 }, (_, n) => ({
      queue: 'api',
      tenant: `t${n % 3}`,
      payload: n,
    }));
    // Beside them, a queue without a limit, which the limit must not hold back.
    const free: EnqueueInput[] = Array.from({ length: 60 }, (_, n) => ({
      queue: 'free',
      tenant: `t${n % 3}`,
      payload: n,
    }));
    await enqueueBatch(db, [...jobs, ...free]);

    const completions = await race(url, (n) => n % 5 === 0);

    expect(completions.size).toBe(jobs.length + free.length);
    expect([...completions.values()].every((count) => count === 1)).toBe(true);
    const limited = await busiestWindow(db, 'api', 1);
    expect(limited.starts).toBe(36);
    // Never above the limit, and the limit was reached: the claimers were held back, not idle.
    expect(limited.busiest).toBe(6);
    // 36 starts at 6 a second take at least 5 s from the first to the last.
    expect(limited.spanSeconds).toBeGreaterThanOrEqual(5);
    // The free queue ran at the claimers' pace, not the limit's.
    const unlimited = await busiestWindow(db, 'free', 1);
    expect(unlimited.starts).toBe(60 + 12);
    expect(unlimited.busiest).toBeGreaterThan(6);
    // Every tenant had starts in the limited queue: the limit is shared, not per tenant.
    const perTenant = await db.query<{ tenant: string; starts: number }>({
      text: `SELECT j.tenant, count(*)::integer AS starts FROM starts s JOIN skiplock.all_jobs j ON j.id = s.job_id
             WHERE s.queue = 'api' GROUP BY 1 ORDER BY 1`,
      params: [],
    });
    expect(perTenant.map((row) => row.starts)).toEqual([12, 12, 12]);
  });

  it('lets the excess wait in the queue, says its starts in the window, and lifts with the limit', async () => {
    const { db } = await open('pg');
    const queue = await setQueue(db, 'api', { concurrency: null, weight: 1, rateLimit: { count: 2, perSeconds: 60 } });
    expect(queue).toMatchObject({ rateLimit: { count: 2, perSeconds: 60 }, custom: true, startsInWindow: 0 });
    await enqueueBatch(
      db,
      ['a', 'b', 'c', 'd'].map((payload) => ({ queue: 'api', payload })),
    );
    // The claim of one tenant's one queue (the plain path) and a claim of several: both keep the limit.
    const first = await claimBatch(db, { max: 10, workerId: 'w' });
    expect(first.map((job) => job.payload)).toEqual(['a', 'b']);
    await enqueueBatch(db, [
      { queue: 'api', tenant: 'other', payload: 'e' },
      { queue: 'mail', payload: 'm' },
    ]);
    expect((await claimBatch(db, { max: 10, workerId: 'w' })).map((job) => job.payload)).toEqual(['m']);
    expect(await getQueue(db, 'api')).toMatchObject({ startsInWindow: 2 });
    // A job that ends frees no room: the limit counts starts, not running jobs.
    await completeMany(db, first);
    expect(await claimBatch(db, { max: 10, workerId: 'w' })).toEqual([]);
    // A higher limit counts the starts already in its window.
    await setQueue(db, 'api', { concurrency: null, weight: 1, rateLimit: { count: 3, perSeconds: 60 } });
    const third = await claimBatch(db, { max: 10, workerId: 'w' });
    expect(third).toHaveLength(1);
    expect(await claimBatch(db, { max: 10, workerId: 'w' })).toEqual([]);
    // With a concurrency cap too, the lesser room wins.
    await setQueue(db, 'api', { concurrency: 1, weight: 1, rateLimit: { count: 10, perSeconds: 60 } });
    expect(await claimBatch(db, { max: 10, workerId: 'w' })).toEqual([]);
    // Without the limit, the rest start.
    const lifted = await setQueue(db, 'api', { concurrency: null, weight: 1 });
    expect(lifted).toMatchObject({ rateLimit: null, startsInWindow: null });
    const rest = await claimBatch(db, { max: 10, workerId: 'w' });
    expect([...third, ...rest].map((job) => job.payload).sort()).toEqual(['c', 'd', 'e']);
  });

  it('refuses a limit under 1, a window under 1 s, or numbers not whole, by name, changing nothing', async () => {
    const { db } = await open('pg');
    await setQueue(db, 'api', { concurrency: 5, weight: 2, rateLimit: { count: 10, perSeconds: 1 } });
    for (const [rateLimit, field] of [
      [{ count: 0, perSeconds: 1 }, 'rateLimit.count'],
      [{ count: -3, perSeconds: 1 }, 'rateLimit.count'],
      [{ count: 10_001, perSeconds: 1 }, 'rateLimit.count'],
      [{ count: 1.5, perSeconds: 1 }, 'rateLimit.count'],
      [{ count: 5, perSeconds: 0 }, 'rateLimit.perSeconds'],
      [{ count: 5, perSeconds: 0.5 }, 'rateLimit.perSeconds'],
      [{ count: 5, perSeconds: -1 }, 'rateLimit.perSeconds'],
      [{ count: 5, perSeconds: 86_401 }, 'rateLimit.perSeconds'],
    ] as const) {
      const refused = setQueue(db, 'api', { concurrency: 1, weight: 1, rateLimit });
      await expect(refused).rejects.toBeInstanceOf(InvalidInputError);
      await expect(refused).rejects.toMatchObject({ field });
    }
    // In SQL, the table's checks refuse them by constraint.
    for (const [set, constraint] of [
      ['rate_limit = 0', 'queues_rate_limit_range'],
      ['rate_seconds = 0', 'queues_rate_seconds_range'],
      ['rate_limit = NULL', 'queues_rate_whole'],
    ]) {
      await expect(
        db.query({ text: `UPDATE skiplock.queues SET ${set} WHERE name = 'api'`, params: [] }),
      ).rejects.toMatchObject({ code: '23514', constraint });
    }
    expect(await getQueue(db, 'api')).toMatchObject({
      concurrency: 5,
      weight: 2,
      rateLimit: { count: 10, perSeconds: 1 },
    });
  });
});

describe('a queue rate limit that drops its excess', () => {
  const dropping = (count: number, perSeconds: number) =>
    ({ concurrency: null, weight: 1, rateLimit: { count, perSeconds, onExcess: 'drop' } }) as const;

  it('ends the excess cancelled at enqueue, saying why; starts and turns not started count', async () => {
    const { db } = await open('pg');
    const queue = await setQueue(db, 'ping', dropping(2, 3600));
    expect(queue.rateLimit).toEqual({ count: 2, perSeconds: 3600, onExcess: 'drop' });
    const results = await enqueueBatch(
      db,
      ['a', 'b', 'c'].map((payload, n) => ({ queue: 'ping', tenant: `t${n}`, payload })),
    );
    expect(results.map(({ job }) => job.status)).toEqual(['queued', 'queued', 'cancelled']);
    const reason = 'its queue ping was at its rate limit (2 starts in 3600 s)';
    expect(results[2]!.job.lastError).toEqual({ name: 'RateLimitedError', message: reason });
    // The history keeps it, with the reason.
    const dropped = await getJob(db, results[2]!.job.id);
    expect(dropped).toMatchObject({ status: 'cancelled', lastError: { name: 'RateLimitedError' } });
    const events = await getJobEvents(db, results[2]!.job.id);
    expect(events.find((event) => event.kind === 'cancelled')?.detail).toEqual({ reason });
    // Two let through and not started hold the window: one more is dropped, in another queue not.
    const [late, other] = await enqueueBatch(db, [
      { queue: 'ping', payload: 'd' },
      { queue: 'mail', payload: 'm' },
    ]);
    expect([late!.job.status, other!.job.status]).toEqual(['cancelled', 'queued']);
    // Started, they still count, as starts in the window.
    const started = await claimBatch(db, { max: 10, workerId: 'w', queues: ['ping'] });
    expect(started.map((job) => job.payload).sort()).toEqual(['a', 'b']);
    await completeMany(db, started);
    expect((await enqueue(db, { queue: 'ping', payload: 'e' })).job.status).toBe('cancelled');
    // In SQL too.
    const [fromSql] = await db.query<{ status: string; error: string }>({
      text: `SELECT e->>'status' AS status, e->'lastError'->>'name' AS error
             FROM skiplock.enqueue('ping', '"f"') e`,
      params: [],
    });
    expect(fromSql).toEqual({ status: 'cancelled', error: 'RateLimitedError' });
    // A higher limit counts the starts already in the window: room for one.
    await setQueue(db, 'ping', dropping(3, 3600));
    const [g, h] = await enqueueBatch(db, [
      { queue: 'ping', payload: 'g', runAt: new Date(Date.now() + 3_600_000).toISOString() },
      { queue: 'ping', payload: 'h' },
    ]);
    expect([g!.job.status, h!.job.status]).toEqual(['scheduled', 'cancelled']);
    // A job let through that ends before it starts gives its turn back.
    await cancel(db, g!.job.id);
    expect((await enqueue(db, { queue: 'ping', payload: 'i' })).job.status).toBe('queued');
    // Throttling again, the excess waits.
    await setQueue(db, 'ping', { concurrency: null, weight: 1, rateLimit: { count: 3, perSeconds: 3600 } });
    expect((await enqueue(db, { queue: 'ping', payload: 'j' })).job.status).toBe('queued');
    expect(await getQueue(db, 'ping')).toMatchObject({ rateLimit: { onExcess: 'throttle' }, startsInWindow: 2 });
  });

  it("lets through exactly the window's room when 8 connections enqueue at once", { timeout: 30_000 }, async () => {
    const { db, url } = await open('pg');
    await setQueue(db, 'ping', dropping(7, 3600));
    const enqueuers: Db[] = Array.from({ length: 8 }, () => pgDb(url, { max: 1 }));
    const results = (
      await Promise.all(
        enqueuers.map(async (one, index) => {
          const mine = [];
          for (let n = 0; n < 10; n += 1) {
            mine.push(await enqueue(one, { queue: 'ping', tenant: `t${index % 3}`, payload: index * 10 + n }));
          }
          return mine;
        }),
      )
    ).flat();
    await Promise.all(enqueuers.map((one) => one.close()));
    expect(results.filter(({ job }) => job.status === 'queued')).toHaveLength(7);
    expect(results.filter(({ job }) => job.status === 'cancelled')).toHaveLength(73);
    const [counts] = await db.query<{ live: number; cancelled: number }>({
      text: `SELECT count(*) FILTER (WHERE state = 'queued')::integer AS live,
                    count(*) FILTER (WHERE state = 'cancelled' AND last_error->>'name' = 'RateLimitedError')::integer
                      AS cancelled
             FROM skiplock.all_jobs`,
      params: [],
    });
    expect(counts).toEqual({ live: 7, cancelled: 73 });
  });

  it('never starts more than the limit in a window while 8 connections enqueue and 8 claim at once; none lost', {
    timeout: 60_000,
  }, async () => {
    const { db, url } = await open('pg', 2);
    await db.query({ text: NOTE_STARTS_SQL, params: [] });
    await setQueue(db, 'ping', dropping(5, 1));
    const enqueuers: Db[] = Array.from({ length: 8 }, () => pgDb(url, { max: 1 }));
    // 8 x 30 jobs, enqueued one at a time a few milliseconds apart for about 2 s, one in five failing its first
    // attempt (its retry is a start too).
    const enqueued = Promise.all(
      enqueuers.map(async (one, index) => {
        const ids: string[] = [];
        for (let n = 0; n < 30; n += 1) {
          ids.push((await enqueue(one, { queue: 'ping', tenant: `t${index % 3}`, payload: index * 30 + n })).job.id);
          await new Promise((resolve) => setTimeout(resolve, 60));
        }
        return ids;
      }),
    );
    const completions = await race(url, (n) => n % 5 === 0);
    const ids = (await enqueued).flat();
    await Promise.all(enqueuers.map((one) => one.close()));

    expect(ids).toHaveLength(240);
    expect([...completions.values()].every((count) => count === 1)).toBe(true);
    const window = await busiestWindow(db, 'ping', 1);
    expect(window.busiest).toBeLessThanOrEqual(5);
    // Every job ended: succeeded, or cancelled by the rate limit at enqueue; none is left or lost.
    const ends = await db.query<{ status: string; error: string | null; n: number }>({
      text: `SELECT j.state AS status, j.last_error->>'name' AS error, count(*)::integer AS n
             FROM skiplock.all_jobs j WHERE j.id = ANY ($1::uuid[]) GROUP BY 1, 2 ORDER BY 1`,
      params: [ids],
    });
    const succeeded = ends.find((row) => row.status === 'succeeded')?.n ?? 0;
    const dropped = ends.find((row) => row.status === 'cancelled' && row.error === 'RateLimitedError')?.n ?? 0;
    expect(succeeded + dropped).toBe(240);
    expect(succeeded).toBe(completions.size);
    expect(dropped).toBeGreaterThan(0);
    expect(succeeded).toBeGreaterThan(0);
  });

  it('refuses an onExcess other than throttle or drop, and in SQL a drop without a limit, changing nothing', async () => {
    const { db } = await open('pg');
    await setQueue(db, 'api', { concurrency: 5, weight: 2, rateLimit: { count: 10, perSeconds: 1 } });
    const refused = setQueue(db, 'api', {
      concurrency: 1,
      weight: 1,
      rateLimit: { count: 5, perSeconds: 1, onExcess: 'wait' as 'drop' },
    });
    await expect(refused).rejects.toBeInstanceOf(InvalidInputError);
    await expect(refused).rejects.toMatchObject({ field: 'rateLimit.onExcess' });
    await setQueue(db, 'plain', { concurrency: null, weight: 1 });
    for (const [queue, set, constraint] of [
      ['api', `rate_mode = 'wait'`, 'queues_rate_mode_known'],
      ['plain', `rate_mode = 'drop'`, 'queues_rate_mode_needs_limit'],
    ]) {
      await expect(
        db.query({ text: `UPDATE skiplock.queues SET ${set} WHERE name = '${queue}'`, params: [] }),
      ).rejects.toMatchObject({ code: '23514', constraint });
    }
    expect(await getQueue(db, 'api')).toMatchObject({
      concurrency: 5,
      weight: 2,
      rateLimit: { count: 10, perSeconds: 1, onExcess: 'throttle' },
    });
    expect(await getQueue(db, 'plain')).toMatchObject({ rateLimit: null });
  });
});
