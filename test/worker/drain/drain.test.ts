import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { drainOnce } from '../../../src/drain/drain-once';
import { sleepJob } from '../../../src/drain/handlers/demo';
import { httpJob } from '../../../src/drain/handlers/http';
import { definePeriodicJob, syncPeriodicJobs } from '../../../src/drain/periodic';
import { createRegistry } from '../../../src/drain/registry';
import { sleep } from '../../../src/engine/sleep';
import { httpDatabase } from '../support/databases';
import { claimsNeverOverlap, enqueueJob, eventKinds, jobById, uniqueName } from './support/jobs';

/**
 * The drain itself inside workerd, over the Neon HTTP driver. Each test gives
 * its job type a name of its own (the shared database is drained by other
 * test files too), so only the drains started here can claim its jobs.
 */
const quiet = { info() {}, warn() {}, error() {} };

describe('drainOnce in workerd', () => {
  it('continues a job longer than its budget in later drains, handing it back at each deadline, never running it twice at once', async () => {
    const longSleep = { ...sleepJob, type: uniqueName('sleep') };
    const registry = createRegistry([longSleep]);
    const job = await enqueueJob({ type: longSleep.type, payload: { ms: 3500 }, leaseSeconds: 2 });

    let handedBack = 0;
    for (let round = 0; round < 20 && (await jobById(job.id)).status !== 'succeeded'; round++) {
      // Two drains at a time, as overlapping cron invocations would run.
      const counts = await Promise.all(
        [1, 2].map(() =>
          drainOnce(httpDatabase(env), registry, {
            budgetSeconds: 3,
            concurrency: 5,
            housekeeping: false,
            handBackDelaySeconds: 0.2,
            logger: quiet,
          }),
        ),
      );
      handedBack += counts[0]!.handedBack + counts[1]!.handedBack;
      await sleep(250);
    }

    const done = await jobById(job.id);
    expect(done).toMatchObject({ status: 'succeeded', result: { ok: true, sleptMs: 3500 } });
    expect(handedBack).toBeGreaterThanOrEqual(1);
    const kinds = await eventKinds(job.id);
    expect(kinds.filter((kind) => kind === 'released').length).toBe(handedBack);
    expect(claimsNeverOverlap(kinds)).toBe(true);
    // Every hand-back followed saved progress, so none cost an attempt.
    expect(done.attempts).toBe(1);
  }, 60_000);

  it('enqueues a periodic job once per tick when two drains overlap', async () => {
    const type = uniqueName('tick');
    // Every minute, so the drains' next tick is a minute off: every second, a slow drain could see the next one due.
    const schedule = definePeriodicJob({ name: uniqueName('schedule'), cron: '* * * * *', type });
    // The type is run elsewhere (no handler here): the registry is told it exists.
    const registry = createRegistry([], [schedule], { knownTypes: [type] });
    const db = httpDatabase(env);
    await syncPeriodicJobs(db, registry);

    for (let tick = 1; tick <= 3; tick++) {
      await db.query({
        text: "UPDATE skiplock.schedules SET next_run_at = now() - interval '1 second' WHERE name = $1",
        params: [schedule.name],
      });
      await Promise.all([1, 2].map(() => drainOnce(db, registry, { budgetSeconds: 5, concurrency: 5, logger: quiet })));
      const [row] = await db.query<{ count: number }>({
        text: 'SELECT count(*)::integer AS count FROM skiplock.all_jobs WHERE type = $1',
        params: [type],
      });
      expect(row!.count).toBe(tick);
    }
  });

  it('delivers an http job to a loopback server on the allow-list (the local Neon proxy answers 404: failed for good)', async () => {
    // LOCAL_NEON_PROXY is host:port/<secret>: a path without the secret is not found.
    const proxy = env.LOCAL_NEON_PROXY!.split('/')[0]!;
    const delivery = { ...httpJob({ allowedHosts: [proxy] }), type: uniqueName('http') };
    const job = await enqueueJob({ type: delivery.type, payload: { url: `http://${proxy}/not-here`, method: 'GET' } });

    await drainOnce(httpDatabase(env), createRegistry([delivery]), {
      budgetSeconds: 10,
      concurrency: 5,
      logger: quiet,
    });

    expect(await jobById(job.id)).toMatchObject({
      status: 'failed',
      attempts: 1,
      lastError: { name: 'PermanentError', message: `http://${proxy} answered 404: not found` },
    });
  });
});
