import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Db, Query, Row } from '../../src/db/types';
import { defineJob } from '../../src/drain/define-job';
import { sleep } from '../../src/engine/sleep';
import { enqueueBatch, getJobEvents, setTenant } from '../../src/engine';
import { pgDb } from '../../src/db/pg';
import { SubrequestBudget } from '../../src/drain/subrequest-budget';
import { engineDatabases } from '../support/engine-db';
import { drain, eventKinds, jobById } from './support/drain';

const open = engineDatabases();

/** The same database, counting the claim statements sent through it: how many, how large, and how many out at once. */
function countingClaims(db: Db): { db: Db; claims: () => number; sizes: number[]; peakOut: () => number } {
  const sizes: number[] = [];
  let out = 0;
  let peakOut = 0;
  const counted: Db = {
    query<R = Row>(query: Query) {
      if (query.name !== 'skiplock_claim_batch') return db.query<R>(query);
      sizes.push(query.params[0] as number);
      out += 1;
      peakOut = Math.max(peakOut, out);
      return db.query<R>(query).finally(() => {
        out -= 1;
      });
    },
    transaction: (queries) => db.transaction(queries),
    close: () => db.close(),
  };
  return { db: counted, claims: () => sizes.length, sizes, peakOut: () => peakOut };
}

describe('claiming ahead (claimBatchSize above the concurrency)', () => {
  it('takes many jobs per claim, half a batch each with two claims out at once, runs no more at once than its concurrency, and runs each once', async () => {
    const { db } = await open('pg');
    const { db: counted, claims, sizes, peakOut } = countingClaims(db);
    let inFlight = 0;
    let peak = 0;
    const runs = new Map<string, number>();
    const short = defineJob('short', z.unknown(), async (_payload, context) => {
      inFlight += 1;
      peak = Math.max(peak, inFlight);
      runs.set(context.job.id, (runs.get(context.job.id) ?? 0) + 1);
      await sleep(1);
      inFlight -= 1;
    });
    await enqueueBatch(
      db,
      Array.from({ length: 60 }, () => ({ queue: 'short' })),
    );

    const counts = await drain(counted, [short], { concurrency: 2, claimBatchSize: 25 });

    expect(counts).toMatchObject({ claimed: 60, succeeded: 60, handedBack: 0 });
    expect(peak).toBe(2);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    expect(runs.size).toBe(60);
    // The first claim alone (the queue may be idle); after it came back full, two at once, none larger than half a batch.
    expect(sizes[0]).toBe(13);
    expect(Math.max(...sizes)).toBe(13);
    expect(peakOut()).toBe(2);
    // 60 jobs in claims of at most 13, and some that find the queue empty or come back short (more on a
    // loaded machine, where claims and attempts interleave otherwise): far fewer than the 30 that
    // claiming for the two free slots would take.
    expect(claims()).toBeGreaterThanOrEqual(5);
    expect(claims()).toBeLessThan(30);
  });

  it('claims a whole batch, one claim at a time, under a subrequest cap', async () => {
    const { db } = await open('pg');
    const { db: counted, sizes, peakOut } = countingClaims(db);
    const short = defineJob('short', z.unknown(), async () => {
      await sleep(1);
    });
    await enqueueBatch(
      db,
      Array.from({ length: 60 }, () => ({ queue: 'short' })),
    );

    const counts = await drain(counted, [short], {
      concurrency: 2,
      claimBatchSize: 25,
      subrequests: new SubrequestBudget(1000),
    });

    expect(counts).toMatchObject({ claimed: 60, succeeded: 60, handedBack: 0 });
    expect(peakOut()).toBe(1);
    expect(sizes[0]).toBe(25);
  });

  it('runs each job once and keeps a tenant limit when several loops claim ahead, each with two claims out', async () => {
    const { db, url } = await open('pg');
    await setTenant(db, 'limited', { concurrency: 4, rateLimit: null, weight: 1 });
    const runs = new Map<string, number>();
    let limitedRunning = 0;
    let limitedPeak = 0;
    const counted = defineJob('counted', z.unknown(), async (_payload, context) => {
      runs.set(context.job.id, (runs.get(context.job.id) ?? 0) + 1);
      const limited = context.job.tenant === 'limited';
      if (limited) limitedPeak = Math.max(limitedPeak, ++limitedRunning);
      await sleep(Math.random() * 2);
      if (limited) limitedRunning -= 1;
    });
    const tenants = ['a', 'b', 'limited'];
    for (let start = 0; start < 1500; start += 750) {
      await enqueueBatch(
        db,
        Array.from({ length: 750 }, (_, n) => ({ queue: 'counted', tenant: tenants[(start + n) % 3]! })),
      );
    }
    const loops = Array.from({ length: 3 }, () => countingClaims(pgDb(url, { max: 8 })));

    // A drain ends once its claims find nothing, and one whose claims find the limited tenant full
    // (its slots held by the other loops) ends with jobs waiting: the loops drain again, as cron ticks would.
    let succeeded = 0;
    for (let tick = 0; tick < 20 && succeeded < 1500; tick++) {
      const results = await Promise.all(
        loops.map((loop) => drain(loop.db, [counted], { concurrency: 8, claimBatchSize: 100 })),
      );
      succeeded += results.reduce((sum, result) => sum + result.succeeded, 0);
    }
    await Promise.all(loops.map((loop) => loop.db.close()));

    expect(succeeded).toBe(1500);
    expect(runs.size).toBe(1500);
    expect([...runs.values()].every((count) => count === 1)).toBe(true);
    expect(limitedPeak).toBeLessThanOrEqual(4);
    expect(limitedPeak).toBeGreaterThan(0);
    expect(Math.max(...loops.map((loop) => loop.peakOut()))).toBe(2);
  });

  it("dates each attempt from its handler's start, not the claim: time held for a slot is waiting, not running", async () => {
    const { db } = await open('pg');
    // Each attempt's handler, as it saw itself: when it started and how long it ran.
    const handlerRuns = new Map<string, { startedAt: number; ms: number }>();
    const slow = defineJob('slow', z.object({ fail: z.boolean() }), async ({ fail }, context) => {
      const startedAt = Date.now();
      try {
        await sleep(300);
        if (fail && context.attempt === 1) throw new Error('first attempt fails');
      } finally {
        handlerRuns.set(`${context.job.id}/${context.attempt}`, { startedAt, ms: Date.now() - startedAt });
      }
    });
    const ran = (id: string, attempt: number) => handlerRuns.get(`${id}/${attempt}`)!;
    // One slot, three jobs claimed at once: the third waits for two runs of 300 ms before it starts.
    const results = await enqueueBatch(
      db,
      [{ fail: false }, { fail: false }, { fail: true }].map((payload) => ({
        queue: 'slow',
        payload,
        backoffBaseSeconds: 0.001,
      })),
    );
    const ids = results.map((result) => result.job.id);

    await drain(db, [slow], { concurrency: 1, claimBatchSize: 3 });

    // Bounds from below, or by what the handlers measured: a loaded machine makes every run longer.
    const third = await jobById(db, ids[2]!);
    expect(third).toMatchObject({ status: 'succeeded', attempts: 2 });
    const [failed] = (await getJobEvents(db, third.id)).filter((event) => event.kind === 'failed');
    const first = failed!.detail as { startedAt: string; waitMs: number; runMs: number };
    // Held for two runs, it waited at least 600 ms, and ran its own run: counting the wait as running would add it.
    expect(first.waitMs).toBeGreaterThanOrEqual(550);
    expect(first.runMs).toBeGreaterThanOrEqual(290);
    expect(first.runMs).toBeLessThan(ran(third.id, 1).ms + first.waitMs);
    // The database dates the start by its own clock: never after the handler's, and after the job before it started.
    expect(Date.parse(first.startedAt)).toBeLessThanOrEqual(ran(third.id, 1).startedAt + 5);
    expect(Date.parse(first.startedAt)).toBeGreaterThan(ran(ids[1]!, 1).startedAt);
    // The job's own row: the last attempt's start and run, and the run time of both attempts (no wait).
    expect(third.durationMs).toBeGreaterThanOrEqual(290);
    expect(third.durationMs).toBeLessThan(third.runMs);
    // Each run is timed to the millisecond on both sides, so the sum may round a millisecond or two below.
    expect(third.runMs).toBeGreaterThanOrEqual(first.runMs + 280);
    expect(third.runMs).toBeLessThan(first.runMs + ran(third.id, 2).ms + first.waitMs);
    // The second job waited for the first one's run, which its duration does not count.
    const second = await jobById(db, ids[1]!);
    expect(Date.parse(second.startedAt!) - Date.parse(second.runAt)).toBeGreaterThanOrEqual(250);
    expect(second.durationMs).toBeLessThan(ran(second.id, 1).ms + ran(ids[0]!, 1).ms);
  });

  it('hands back unstarted a job that waited for a slot until half its lease ran out', async () => {
    const { db } = await open('pg');
    const started: string[] = [];
    const slow = defineJob('slow', z.unknown(), async (_payload, context) => {
      started.push(context.job.id);
      if (started.length === 1) await sleep(1500);
    });
    const [first, second] = await enqueueBatch(db, [
      { queue: 'slow', leaseSeconds: 2 },
      { queue: 'slow', leaseSeconds: 2 },
    ]);

    const counts = await drain(db, [slow], { concurrency: 1, claimBatchSize: 2, handBackDelaySeconds: 0 });

    // The second waited 1.5 s of its 2 s lease behind the first: handed back, then claimed again and run.
    expect(counts).toMatchObject({ claimed: 3, succeeded: 2, handedBack: 1 });
    expect(started).toEqual([first!.job.id, second!.job.id]);
    expect(await eventKinds(db, second!.job.id)).toEqual(['enqueued', 'claimed', 'released', 'claimed', 'completed']);
    expect(await jobById(db, second!.job.id)).toMatchObject({ status: 'succeeded', attempts: 1 });
  });
});
