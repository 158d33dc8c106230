import { describe, expect, it } from 'vitest';
import { pgDb } from '../../src/db/pg';
import type { Db } from '../../src/db/types';
import { claimBatch, completeMany, enqueueBatch, setQueue, setTenant, type ClaimedJob } from '../../src/engine';
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

interface DrainOutcome {
  /** Completions per job id. */
  completions: Map<string, number>;
  /** Claims that returned more than their max. */
  overMax: number;
  /** The highest running count sampled per value of `groupBy` while the drain ran. */
  peak: Record<string, number>;
}

/**
 * `claimers` connections claim (max 1 to 7) and complete until no job is
 * left, while another samples the running jobs per `groupBy` (a column).
 */
async function drainConcurrently(url: string, claimers: number, groupBy: 'tenant' | 'queue'): Promise<DrainOutcome> {
  const connections: Db[] = Array.from({ length: claimers }, () => pgDb(url, { max: 1 }));
  const sampler = pgDb(url, { max: 1 });
  const completions = new Map<string, number>();
  let overMax = 0;
  const peak: Record<string, number> = {};
  let draining = true;

  const sampling = (async () => {
    while (draining) {
      const rows = await sampler.query<{ key: string; running: number }>({
        text: `SELECT ${groupBy} AS key, count(*)::integer AS running FROM skiplock.jobs WHERE state = 'running' GROUP BY 1`,
        params: [],
      });
      for (const { key, running } of rows) peak[key] = Math.max(peak[key] ?? 0, running);
    }
  })();

  await Promise.all(
    connections.map(async (db, index) => {
      for (;;) {
        const max = 1 + (index % 7);
        const jobs: ClaimedJob[] = await claimBatch(db, { max, workerId: `claimer-${index}`, leaseSeconds: 60 });
        if (jobs.length > max) overMax += 1;
        if (jobs.length === 0) {
          // Empty can mean "every ready job is held back by a limit": stop only when nothing is left.
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
  await Promise.all([...connections, sampler].map((db) => db.close()));
  return { completions, overMax, peak };
}

/** The finished jobs' story: the most runs held at one instant per value of `groupBy`. */
async function peakFromHistory(db: Db, groupBy: 'tenant' | 'queue'): Promise<Record<string, number>> {
  const rows = await db.query<{ key: string; peak: number }>({
    text: `
      WITH intervals AS (
        SELECT ${groupBy} AS key, started_at AS started, finished_at AS ended FROM skiplock.finished_jobs
      ),
      edges AS (
        SELECT key, started AS at, 1 AS delta FROM intervals
        UNION ALL SELECT key, ended, -1 FROM intervals
      )
      SELECT key, max(running)::integer AS peak FROM (
        SELECT key, sum(delta) OVER (PARTITION BY key ORDER BY at, delta) AS running FROM edges
      ) s GROUP BY key`,
    params: [],
  });
  return Object.fromEntries(rows.map((row) => [row.key, row.peak]));
}

function expectEachOnce({ completions, overMax }: DrainOutcome, jobs: number): void {
  expect(overMax).toBe(0);
  expect(completions.size).toBe(jobs);
  expect([...completions.values()].every((count) => count === 1)).toBe(true);
}

describe('claiming under contention (real connections)', () => {
  it(`${CLAIMERS} claimers drain ${4 * JOBS_PER_TENANT} jobs: each completed once, no tenant above its limit, no claim above max`, async () => {
    const { db: setup, url } = await open('pg', 4);
    for (const [tenant, concurrency] of Object.entries(LIMITS)) {
      await setTenant(setup, tenant, { concurrency, rateLimit: null, weight: 1 });
    }
    for (const tenant of Object.keys(LIMITS)) {
      for (let i = 0; i < JOBS_PER_TENANT; i += 1000) {
        const size = Math.min(1000, JOBS_PER_TENANT - i);
        await enqueueBatch(
          setup,
          Array.from({ length: size }, (_, k) => ({ queue: 'work', tenant, payload: i + k })),
        );
      }
    }

    const outcome = await drainConcurrently(url, CLAIMERS, 'tenant');
    expectEachOnce(outcome, 4 * JOBS_PER_TENANT);
    expect(await unfinished(setup)).toBe(0);
    expect(outcome.peak.one).toBeLessThanOrEqual(1);
    expect(outcome.peak.two).toBeLessThanOrEqual(2);
    expect(outcome.peak.five).toBeLessThanOrEqual(5);

    // At no instant did a tenant hold more runs than its limit.
    const eventPeak = await peakFromHistory(setup, 'tenant');
    expect(eventPeak.one).toBe(1);
    expect(eventPeak.two).toBeLessThanOrEqual(2);
    expect(eventPeak.five).toBeLessThanOrEqual(5);
    expect(eventPeak.free).toBeGreaterThan(5);
  });

  it(`${CLAIMERS} claimers drain capped and uncapped queues of several tenants: no queue above its cap, each job once`, async () => {
    const { db: setup, url } = await open('pg', 4);
    await setQueue(setup, 'pdf', { concurrency: 3, weight: 1 });
    await setQueue(setup, 'mail', { concurrency: 6, weight: 2 });
    await setTenant(setup, 'two', { concurrency: 2, rateLimit: null, weight: 1 });
    for (const tenant of ['one', 'two', 'three']) {
      for (const queue of ['pdf', 'mail', 'open']) {
        await enqueueBatch(
          setup,
          Array.from({ length: 300 }, (_, k) => ({ queue, tenant, payload: k })),
        );
      }
    }

    const outcome = await drainConcurrently(url, CLAIMERS, 'queue');
    expectEachOnce(outcome, 2700);
    expect(await unfinished(setup)).toBe(0);
    expect(outcome.peak.pdf).toBeLessThanOrEqual(3);
    expect(outcome.peak.mail).toBeLessThanOrEqual(6);

    const queuePeak = await peakFromHistory(setup, 'queue');
    expect(queuePeak.pdf).toBe(3);
    expect(queuePeak.mail).toBeLessThanOrEqual(6);
    expect(queuePeak.open).toBeGreaterThan(6);
    // The tenant limit holds beside the caps.
    expect((await peakFromHistory(setup, 'tenant')).two).toBeLessThanOrEqual(2);
  });

  it('never returns more than max, even when many claimers race for one deep queue', async () => {
    const { db: setup, url } = await open('pg', 2);
    for (let i = 0; i < 3; i++) {
      await enqueueBatch(
        setup,
        Array.from({ length: 1000 }, () => ({ queue: 'deep' })),
      );
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
