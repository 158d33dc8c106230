import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { pgDb } from '../../src/db/pg';
import { defineJob } from '../../src/drain/define-job';
import { sleep } from '../../src/engine/sleep';
import { enqueueBatch } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';
import { drain } from './support/drain';

const open = engineDatabases();

describe('what a drain claims and how many it runs at once', () => {
  it('never runs more jobs at once than its concurrency', async () => {
    const { db } = await open('pg');
    let inFlight = 0;
    let peak = 0;
    const measured = defineJob('measured', z.object({ ms: z.number() }), async ({ ms }) => {
      inFlight += 1;
      peak = Math.max(peak, inFlight);
      await sleep(ms);
      inFlight -= 1;
    });
    await enqueueBatch(db, Array.from({ length: 40 }, (_, i) => ({ queue: 'measured', payload: { ms: 5 + (i % 4) * 10 } })));

    const counts = await drain(db, [measured], { concurrency: 4 });

    expect(counts).toMatchObject({ claimed: 40, succeeded: 40 });
    expect(peak).toBeLessThanOrEqual(4);
    expect(peak).toBeGreaterThan(1);
  });

  it('claims only the types it has handlers for; the others stay queued for pull workers', async () => {
    const { db } = await open('pg');
    const known = defineJob('known', z.unknown(), () => 'done');
    await enqueueBatch(db, [
      { queue: 'mixed', type: 'known' },
      { queue: 'mixed', type: 'unknown' },
      { queue: 'mixed', type: 'known' },
    ]);

    const counts = await drain(db, [known]);

    expect(counts).toMatchObject({ claimed: 2, succeeded: 2 });
    const rows = await db.query<{ type: string; state: string; attempts: number }>({
      text: 'SELECT type, state, attempts FROM skiplock.all_jobs ORDER BY id',
      params: [],
    });
    expect(rows).toEqual([
      { type: 'known', state: 'succeeded', attempts: 1 },
      { type: 'unknown', state: 'queued', attempts: 0 },
      { type: 'known', state: 'succeeded', attempts: 1 },
    ]);
  });

  it('runs each job once when two drains overlap', async () => {
    const { db, url } = await open('pg');
    const runs = new Map<string, number>();
    const counted = defineJob('counted', z.unknown(), async (_payload, context) => {
      runs.set(context.job.id, (runs.get(context.job.id) ?? 0) + 1);
      await sleep(Math.random() * 5);
    });
    await enqueueBatch(db, Array.from({ length: 200 }, () => ({ queue: 'counted' })));
    const other = pgDb(url, { max: 6 });

    const [a, b] = await Promise.all([drain(db, [counted]), drain(other, [counted])]);
    await other.close();

    expect(a.succeeded + b.succeeded).toBe(200);
    expect(runs.size).toBe(200);
    expect([...runs.values()].every((count) => count === 1)).toBe(true);
  });
});
