import { createServer } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConnectionGate } from '../../src/drain/connection-gate';
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
    await enqueueBatch(
      db,
      Array.from({ length: 40 }, (_, i) => ({ queue: 'measured', payload: { ms: 5 + (i % 4) * 10 } })),
    );

    const counts = await drain(db, [measured], { concurrency: 4 });

    expect(counts).toMatchObject({ claimed: 40, succeeded: 40 });
    expect(peak).toBeLessThanOrEqual(4);
    expect(peak).toBeGreaterThan(1);
  });

  it("runs more jobs than connections: their ctx.fetch calls wait for one of the gate's, one always kept for the drain", async () => {
    const { db } = await open('pg');
    let open_ = 0;
    let peakOpen = 0;
    // A receiver that holds each request 100 ms and streams its answer: the connection is open until the body is read.
    const server = createServer((_request, response) => {
      open_ += 1;
      peakOpen = Math.max(peakOpen, open_);
      setTimeout(() => {
        response.write('half ');
        setTimeout(() => {
          open_ -= 1;
          response.end('done');
        }, 20);
      }, 100);
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
    let inFlight = 0;
    let peakJobs = 0;
    const fetching = defineJob('fetching', z.unknown(), async (_payload, ctx) => {
      inFlight += 1;
      peakJobs = Math.max(peakJobs, inFlight);
      await sleep(30);
      const text = await (await ctx.fetch(url)).text();
      inFlight -= 1;
      return { text };
    });
    await enqueueBatch(
      db,
      Array.from({ length: 24 }, () => ({ queue: 'fetching', type: 'fetching' })),
    );

    try {
      const counts = await drain(db, [fetching], { concurrency: 12, connections: new ConnectionGate(4) });

      expect(counts).toMatchObject({ claimed: 24, succeeded: 24 });
      // 12 jobs at once, but never more than 3 of their requests open: the fourth connection is the drain's.
      expect(peakJobs).toBeGreaterThan(4);
      expect(peakOpen).toBeLessThanOrEqual(3);
      expect(peakOpen).toBeGreaterThan(1);
    } finally {
      server.close();
    }
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
    await enqueueBatch(
      db,
      Array.from({ length: 200 }, () => ({ queue: 'counted' })),
    );
    const other = pgDb(url, { max: 6 });

    const [a, b] = await Promise.all([drain(db, [counted]), drain(other, [counted])]);
    await other.close();

    expect(a.succeeded + b.succeeded).toBe(200);
    expect(runs.size).toBe(200);
    expect([...runs.values()].every((count) => count === 1)).toBe(true);
  });
});
