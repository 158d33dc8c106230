import { describe, expect, it } from 'vitest';
import { pgDb } from '../../src/db/pg';
import type { Db } from '../../src/db/types';
import { claimBatch, completeMany, enqueueBatch, setTenant, type ClaimedJob } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();

async function unfinished(db: Db): Promise<number> {
  const [row] = await db.query<{ count: number }>({
    text: 'SELECT count(*)::integer AS count FROM skiplock.jobs',
    params: [],
  });
  return row!.count;
}

/** Limits per tenant in the contention run. */
const LIMITS: Record<string, number | null> = { one: 1, two: 2, five: 5, free: null };
const JOBS_PER_TENANT = 1250;
const CLAIMERS = 10;

describe('claiming under contention (real connections)', () => {
  it(`${CLAIMERS} claimers drain ${4 * JOBS_PER_TENANT} jobs: each completed once, no tenant above its limit, no claim above max`, async () => {
    const { db: setup, url } = await open('pg', 4);
    for (const [tenant, concurrency] of Object.entries(LIMITS)) {
      await setTenant(setup, tenant, { concurrency, rateLimit: null, weight: 1 });
    }
    for (const tenant of Object.keys(LIMITS)) {
      for (let i = 0; i < JOBS_PER_TENANT; i += 1000) {
        const size = Math.min(1000, JOBS_PER_TENANT - i);
        await enqueueBatch(setup, Array.from({ length: size }, (_, k) => ({ queue: 'work', tenant, payload: i + k })));
      }
    }

    const claimers: Db[] = Array.from({ length: CLAIMERS }, () => pgDb(url, { max: 1 }));
    const sampler = pgDb(url, { max: 1 });
    const completions = new Map<string, number>();
    let overMax = 0;
    let peak: Record<string, number> = {};
    let draining = true;

    // Samples the running count per tenant from the database while the drain runs.
    const sampling = (async () => {
      while (draining) {
        const rows = await sampler.query<{ tenant: string; running: number }>({
          text: "SELECT tenant, count(*)::integer AS running FROM skiplock.jobs WHERE state = 'running' GROUP BY tenant",
          params: [],
        });
        for (const { tenant, running } of rows) peak = { ...peak, [tenant]: Math.max(peak[tenant] ?? 0, running) };
      }
    })();

    await Promise.all(
      claimers.map(async (db, index) => {
        for (;;) {
          const max = 1 + (index % 7);
          const jobs: ClaimedJob[] = await claimBatch(db, { max, workerId: `claimer-${index}`, leaseSeconds: 60 });
          if (jobs.length > max) overMax += 1;
          if (jobs.length === 0) {
            // Empty can mean "every ready job's tenant is at its limit": stop only when nothing is left.
            if ((await unfinished(db)) === 0) break;
            await new Promise((resolve) => setTimeout(resolve, 5));
            continue;
          }
          const { completed, stale } = await completeMany(db, jobs);
          expect(stale).toEqual([]);
          for (const id of completed) completions.set(id, (completions.get(id) ?? 0) + 1);
        }
      }),
    );
    draining = false;
    await sampling;
    await Promise.all([...claimers, sampler].map((db) => db.close()));

    expect(overMax).toBe(0);
    expect(completions.size).toBe(4 * JOBS_PER_TENANT);
    expect([...completions.values()].every((count) => count === 1)).toBe(true);
    expect(await unfinished(setup)).toBe(0);
    expect(peak.one).toBeLessThanOrEqual(1);
    expect(peak.two).toBeLessThanOrEqual(2);
    expect(peak.five).toBeLessThanOrEqual(5);

    // The finished jobs tell the same story: at no instant did a tenant hold more runs than its limit.
    const overlaps = await setup.query<{ tenant: string; peak: number }>({
      text: `
        WITH intervals AS (
          SELECT tenant, started_at AS started, finished_at AS ended FROM skiplock.finished_jobs
        ),
        edges AS (
          SELECT tenant, started AS at, 1 AS delta FROM intervals
          UNION ALL SELECT tenant, ended, -1 FROM intervals
        )
        SELECT tenant, max(running)::integer AS peak FROM (
          SELECT tenant, sum(delta) OVER (PARTITION BY tenant ORDER BY at, delta) AS running FROM edges
        ) s GROUP BY tenant`,
      params: [],
    });
    const eventPeak = Object.fromEntries(overlaps.map((row) => [row.tenant, row.peak]));
    expect(eventPeak.one).toBe(1);
    expect(eventPeak.two).toBeLessThanOrEqual(2);
    expect(eventPeak.five).toBeLessThanOrEqual(5);
    expect(eventPeak.free).toBeGreaterThan(5);
  });

  it('never returns more than max, even when many claimers race for one deep queue', async () => {
    const { db: setup, url } = await open('pg', 2);
    for (let i = 0; i < 3; i++) {
      await enqueueBatch(setup, Array.from({ length: 1000 }, () => ({ queue: 'deep' })));
    }
    const claimers = Array.from({ length: 12 }, () => pgDb(url, { max: 1 }));
    const claims = await Promise.all(
      claimers.map(async (db, i) => {
        const seen: ClaimedJob[][] = [];
        for (let round = 0; round < 10; round++) seen.push(await claimBatch(db, { max: 3, workerId: `w${i}` }));
        return seen;
      }),
    );
    await Promise.all(claimers.map((db) => db.close()));
    const all = claims.flat();
    expect(Math.max(...all.map((jobs) => jobs.length))).toBeLessThanOrEqual(3);
    const claimedIds = all.flat().map((job) => job.id);
    const [row] = await setup.query<{ running: number }>({
      text: "SELECT count(*)::integer AS running FROM skiplock.jobs WHERE state = 'running'",
      params: [],
    });
    // Every claim handed out a different job, and every one is accounted for.
    expect(new Set(claimedIds).size).toBe(claimedIds.length);
    expect(row!.running).toBe(claimedIds.length);
  });
});
