import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Db, Query, Row } from '../../src/db/types';
import { defineJob } from '../../src/drain/define-job';
import { sleep } from '../../src/engine/sleep';
import { enqueueBatch } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';
import { drain, eventKinds, jobById } from './support/drain';

const open = engineDatabases();

/** The same database, counting the claim statements sent through it. */
function countingClaims(db: Db): { db: Db; claims: () => number } {
  let claims = 0;
  const counted: Db = {
    query<R = Row>(query: Query) {
      if (query.name === 'skiplock_claim_batch') claims += 1;
      return db.query<R>(query);
    },
    transaction: (queries) => db.transaction(queries),
    close: () => db.close(),
  };
  return { db: counted, claims: () => claims };
}

describe('claiming ahead (claimBatchSize above the concurrency)', () => {
  it('takes many jobs per claim, still runs no more at once than its concurrency, and runs each once', async () => {
    const { db } = await open('pg');
    const { db: counted, claims } = countingClaims(db);
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
    await enqueueBatch(db, Array.from({ length: 60 }, () => ({ queue: 'short' })));

    const counts = await drain(counted, [short], { concurrency: 2, claimBatchSize: 25 });

    expect(counts).toMatchObject({ claimed: 60, succeeded: 60, handedBack: 0 });
    expect(peak).toBe(2);
    expect([...runs.values()].every((n) => n === 1)).toBe(true);
    expect(runs.size).toBe(60);
    // 60 jobs in claims of at most 25, the next sent once fewer than half a batch is left
    // (so each takes about half a batch), and one or two that find the queue empty.
    expect(claims()).toBeGreaterThanOrEqual(3);
    expect(claims()).toBeLessThanOrEqual(8);
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
