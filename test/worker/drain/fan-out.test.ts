import { listDurableObjectIds, runInDurableObject } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { enqueueBatch } from '../../../src/engine';
import { scheduledDrain } from '../../../src/worker/drain';
import { drainerName } from '../../../src/worker/fan-out';
import { drainRuntime, httpDatabase } from '../support/databases';
import { DEV, uniqueName } from './support/jobs';
import { waitFor } from '../../support/wait-for';

const drainers = env.SKIPLOCK_DRAINER;

/** Who finished the jobs of `queue`, and in how many attempts: one row per worker id. */
async function finishers(queue: string): Promise<{ workerId: string; jobs: number; maxAttempts: number }[]> {
  return httpDatabase(env).query({
    text: `SELECT worker_id AS "workerId", count(*)::int AS jobs, max(attempts)::int AS "maxAttempts"
             FROM skiplock.finished_jobs WHERE queue = $1 AND state = 'succeeded' GROUP BY worker_id`,
    params: [queue],
  });
}

async function left(queue: string): Promise<number> {
  const [row] = await httpDatabase(env).query<{ count: number }>({
    text: 'SELECT count(*)::int AS count FROM skiplock.jobs WHERE queue = $1',
    params: [queue],
  });
  return row!.count;
}

async function running(queue: string): Promise<number> {
  const [row] = await httpDatabase(env).query<{ count: number }>({
    text: "SELECT count(*)::int AS count FROM skiplock.jobs WHERE queue = $1 AND state = 'running'",
    params: [queue],
  });
  return row!.count;
}

/**
 * Whether every helper has stopped: none drains now, and none has an alarm
 * set to drain again (a helper sets one at the end of a drain that found work).
 * `draining` is the helper's own flag, read inside its Durable Object.
 */
async function helpersStopped(count: number): Promise<boolean> {
  const stopped = await Promise.all(
    Array.from({ length: count }, (_, index) =>
      runInDurableObject(
        drainers.get(drainers.idFromName(drainerName(index + 1))),
        async (instance, state) =>
          !(instance as unknown as { draining: boolean }).draining && (await state.storage.getAlarm()) === null,
      ),
    ),
  );
  return stopped.every(Boolean);
}

/** A Paid plan's drain runtime with helpers bound, DRAIN_FANOUT 4 (three helpers) and a budget of `budgetSeconds`. */
const fanOutRuntime = (budgetSeconds: number) => ({
  ...drainRuntime({ ...DEV, WORKERS_PLAN: 'paid', DRAIN_FANOUT: '4', DRAIN_BUDGET_SECONDS: String(budgetSeconds) }),
  drainers,
});

/**
 * Waits until `queue` is empty and the three helpers have stopped (each stops
 * once a drain of its own finds the queue empty); every one of its `jobs` ran
 * once. Who finished them.
 */
async function finishedOnce(queue: string, jobs: number) {
  await waitFor('the helpers to finish the backlog', async () => (await left(queue)) === 0, {
    everyMs: 100,
    timeoutMs: 60_000,
  });
  await waitFor('the three helpers to stop', () => helpersStopped(3), { everyMs: 100 });
  const byWorker = await finishers(queue);
  expect(byWorker.reduce((sum, row) => sum + row.jobs, 0)).toBe(jobs);
  expect(Math.max(...byWorker.map((row) => row.maxAttempts))).toBe(1);
  return byWorker;
}

/** 1,500 jobs of 100 ms into `queue`, in batches of 500: more than one drain finishes within its budget. */
async function enqueueBacklog(queue: string): Promise<void> {
  for (let batch = 0; batch < 3; batch++) {
    await enqueueBatch(
      httpDatabase(env),
      Array.from({ length: 500 }, () => ({ queue, type: 'sleep', payload: { ms: 100 } })),
    );
  }
}

describe('fan-out', () => {
  it('a drain with a backlog starts DRAIN_FANOUT - 1 helpers; they share the work, each job once, and stop with the backlog', async () => {
    const queue = uniqueName('fan-out');
    await enqueueBacklog(queue);
    // A short budget: the cron drain ends long before the backlog does, so the helpers must carry it.
    const runtime = fanOutRuntime(2);

    const outcome = await scheduledDrain(runtime, '* * * * *');
    if (!outcome.drained) throw new Error('without a queue clock every tick drains');
    expect(outcome.helpers).toBe(3);

    const byWorker = await finishedOnce(queue, 1500);
    // Drains' worker ids are skiplock:<name>-<random>.
    const drainNames = byWorker.map((row) => row.workerId.replace(/^skiplock:/, '').replace(/-[0-9a-f]{8}$/, ''));
    const helperNames = new Set(drainNames.filter((name) => name !== 'cron'));
    // Helpers carried part of the backlog (how many of them got some depends on the machine's pace),
    // and only the three DRAIN_FANOUT allows.
    expect(helperNames.size).toBeGreaterThan(0);
    expect([...helperNames].every((name) => [drainerName(1), drainerName(2), drainerName(3)].includes(name))).toBe(
      true,
    );
    expect((await listDurableObjectIds(drainers)).length).toBeLessThanOrEqual(3);
  });

  it('starts helpers for a backlog that grows after the drain counted it', async () => {
    const queue = uniqueName('fan-out-later');
    // One full claim of the 25 slots, 5 left: at the first count, no helper is called for, and the
    // next waits twice as long (2 s); the first 25 run past it.
    await enqueueBatch(
      httpDatabase(env),
      Array.from({ length: 30 }, () => ({ queue, type: 'sleep', payload: { ms: 2500 } })),
    );
    const runtime = fanOutRuntime(8);
    const drained = scheduledDrain(runtime, '* * * * *');
    // While the first 25 run, a burst arrives; the claim that follows them comes back full again.
    await waitFor('the first claim to start its jobs', async () => (await running(queue)) === 25, { everyMs: 20 });
    await enqueueBatch(
      httpDatabase(env),
      Array.from({ length: 400 }, () => ({ queue, type: 'sleep', payload: { ms: 50 } })),
    );

    const outcome = await drained;
    if (!outcome.drained) throw new Error('without a queue clock every tick drains');
    expect(outcome.helpers).toBe(3);
    await finishedOnce(queue, 430);
  });

  it('starts a helper whose start failed again at the next count, with those after it', async () => {
    const queue = uniqueName('fan-out-refused');
    await enqueueBacklog(queue);
    // The second helper's Durable Object answers its first start with a 503, as one being moved might.
    const refusedId = drainers.idFromName(drainerName(2));
    let startsOfRefused = 0;
    const flakyDrainers = {
      idFromName: (name: string) => drainers.idFromName(name),
      get: (id: DurableObjectId) => {
        const stub = drainers.get(id);
        if (!id.equals(refusedId)) return stub;
        return {
          fetch: async (input: string, init?: RequestInit) => {
            startsOfRefused += 1;
            if (startsOfRefused === 1) return new Response('moving', { status: 503 });
            return stub.fetch(input, init);
          },
        };
      },
    };
    const runtime = { ...fanOutRuntime(4), drainers: flakyDrainers };

    const outcome = await scheduledDrain(runtime, '* * * * *');
    if (!outcome.drained) throw new Error('without a queue clock every tick drains');
    // Refused once, then started at the drain's next count, with the third (which runs already).
    expect(startsOfRefused).toBe(2);
    expect(outcome.helpers).toBe(3);
    await finishedOnce(queue, 1500);
  });

  it('starts no helper for a backlog one drain takes in a claim or two', async () => {
    const queue = uniqueName('no-fan-out');
    await enqueueBatch(
      httpDatabase(env),
      Array.from({ length: 40 }, () => ({ queue, type: 'noop' })),
    );
    const runtime = { ...drainRuntime({ ...DEV, WORKERS_PLAN: 'paid', DRAIN_FANOUT: '4' }), drainers };

    const outcome = await scheduledDrain(runtime, '* * * * *');
    if (!outcome.drained) throw new Error('without a queue clock every tick drains');
    expect(outcome.helpers).toBe(0);
    expect(await left(queue)).toBe(0);
  });

  it('DRAIN_FANOUT defaults by plan, and one that is not a whole number from 1 is refused by name', () => {
    expect(drainRuntime({}).settings.drain.fanout).toBe(2);
    expect(drainRuntime({ WORKERS_PLAN: 'paid' }).settings.drain.fanout).toBe(8);
    expect(drainRuntime({ DRAIN_FANOUT: '1' }).settings.drain.fanout).toBe(1);
    expect(() => drainRuntime({ DRAIN_FANOUT: '0' })).toThrow(
      /DRAIN_FANOUT must be a whole number from 1 to 64, not "0"/,
    );
    expect(() => drainRuntime({ DRAIN_FANOUT: 'many' })).toThrow(/DRAIN_FANOUT must be a whole number/);
  });
});
