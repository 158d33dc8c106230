import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { pgDb } from '../../src/db/pg';
import { defineJob } from '../../src/drain/define-job';
import { sleep } from '../../src/engine/sleep';
import { claimBatch, completeMany, setTenant } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';
import { drain } from '../drain/support/drain';
import { jobStates, peakConcurrency, runHistory } from './support/history';
import { enqueueMany, jobs } from './support/load';
import { recordScenario, seconds } from './support/report';

const open = engineDatabases();

const CONCURRENCY: Record<string, number> = { one: 1, two: 2, five: 5 };
const JOBS_PER_LIMITED_TENANT = 300;
/** The rate-limited tenant may start RATE_COUNT jobs in a window longer than the run, of RATED_JOBS waiting. */
const RATE_COUNT = 25;
const RATED_JOBS = 40;
const DRAINS = 8;
const PULL_WORKERS = 8;

const work = defineJob('work', z.unknown(), () => sleep(5));

describe('scenario 4: 8 drains and 8 pull workers on limited tenants', () => {
  it('never exceeds a concurrency or rate limit, and runs every job once', { timeout: 180_000 }, async () => {
    const { db, url } = await open('pg', 2);
    for (const [tenant, concurrency] of Object.entries(CONCURRENCY)) {
      await setTenant(db, tenant, { concurrency, rateLimit: null, weight: 1 });
    }
    await setTenant(db, 'rated', { concurrency: null, rateLimit: { count: RATE_COUNT, perSeconds: 3600 }, weight: 1 });
    await enqueueMany(db, [
      ...Object.keys(CONCURRENCY).flatMap((tenant) =>
        jobs(JOBS_PER_LIMITED_TENANT, (i) => ({ queue: 'work', tenant, payload: i })),
      ),
      ...jobs(RATED_JOBS, (i) => ({ queue: 'work', tenant: 'rated', payload: i })),
    ]);
    const expected = Object.keys(CONCURRENCY).length * JOBS_PER_LIMITED_TENANT + RATE_COUNT;

    const sampler = pgDb(url, { max: 1 });
    const sampledPeak = new Map<string, number>();
    let samples = 0;
    let samplesAbove = 0;
    let done = false;
    const sampling = (async () => {
      while (!done) {
        const rows = await sampler.query<{ tenant: string; running: number }>({
          text: "SELECT tenant, count(*)::integer AS running FROM skiplock.jobs WHERE state = 'running' GROUP BY tenant",
          params: [],
        });
        samples += 1;
        for (const { tenant, running } of rows) {
          sampledPeak.set(tenant, Math.max(sampledPeak.get(tenant) ?? 0, running));
          if (running > (CONCURRENCY[tenant] ?? Number.POSITIVE_INFINITY)) samplesAbove += 1;
        }
        await sleep(3);
      }
    })();

    const started = Date.now();
    const drains = Array.from({ length: DRAINS }, async (_, index) => {
      const own = pgDb(url, { max: 3 });
      while (!done) {
        await drain(own, [work], { concurrency: 2, workerId: `drain-${index}`, budgetSeconds: 20 });
        await sleep(10);
      }
      await own.close();
    });
    const pullers = Array.from({ length: PULL_WORKERS }, async (_, index) => {
      const own = pgDb(url, { max: 1 });
      while (!done) {
        const claimed = await claimBatch(own, {
          max: 1 + (index % 4),
          workerId: `pull-${index}`,
          types: ['work'],
          leaseSeconds: 60,
        });
        if (claimed.length === 0) {
          await sleep(10);
          continue;
        }
        await sleep(5);
        await completeMany(own, claimed);
      }
      await own.close();
    });
    const deadline = started + 120_000;
    while (((await jobStates(db)).succeeded ?? 0) < expected && Date.now() < deadline) await sleep(100);
    const tookMs = Date.now() - started;
    // Whatever is still to come for the rated tenant would be a violation: give it a moment to show.
    await sleep(500);
    done = true;
    await Promise.all([sampling, ...drains, ...pullers]);
    await sampler.close();

    const history = await runHistory(db);
    const intervalPeak = peakConcurrency(history.runs);
    const ratedClaims = history.runs.filter((run) => run.tenant === 'rated').length;
    const states = await jobStates(db);
    const completedTwice = await db.query<{ id: string }>({
      text: "SELECT id FROM skiplock.finished_jobs WHERE state = 'succeeded' GROUP BY id HAVING count(*) > 1",
      params: [],
    });
    const tenantsAboveFromIntervals = Object.entries(CONCURRENCY).filter(
      ([tenant, limit]) => (intervalPeak.get(tenant) ?? 0) > limit,
    );
    const peaks = Object.keys(CONCURRENCY)
      .map(
        (tenant) =>
          `${tenant} (limit ${CONCURRENCY[tenant]}): sampled ${sampledPeak.get(tenant) ?? 0}, from intervals ${intervalPeak.get(tenant) ?? 0}`,
      )
      .join('; ');
    await recordScenario({
      scenario: 4,
      name: 'Contention on tenant limits',
      load: `${DRAINS} drains + ${PULL_WORKERS} pull workers on ${Object.keys(CONCURRENCY).length} × ${JOBS_PER_LIMITED_TENANT} jobs of tenants with concurrency 1, 2, 5, and ${RATED_JOBS} of a tenant limited to ${RATE_COUNT} starts per hour`,
      faults: `all 16 claimers at once, claims of 1 to 4, handlers of 5 ms; ${samples} samples of the running count`,
      jobsLost: expected - (states.succeeded ?? 0),
      runTwiceAtOnce: history.runTwiceAtOnce.length + completedTwice.length,
      limitViolations: samplesAbove + tenantsAboveFromIntervals.length + Math.max(0, ratedClaims - RATE_COUNT),
      recovery: `n/a (no outage); ${expected} jobs done in ${seconds(tookMs)}`,
      notes: [
        `peak running per tenant: ${peaks}`,
        `rate-limited tenant: ${ratedClaims} started of ${RATED_JOBS} waiting (limit ${RATE_COUNT}); ${states.queued ?? 0} still queued`,
      ],
    });

    expect(samplesAbove).toBe(0);
    expect(tenantsAboveFromIntervals).toEqual([]);
    expect(ratedClaims).toBe(RATE_COUNT);
    expect(states).toEqual({ succeeded: expected, queued: RATED_JOBS - RATE_COUNT });
    expect(history.runTwiceAtOnce).toEqual([]);
    expect(completedTwice).toEqual([]);
  });
});
