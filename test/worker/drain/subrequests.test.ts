import { env, exports } from 'cloudflare:workers';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { enqueueBatch } from '../../../src/engine';
import { fastPathDrain, scheduledDrain } from '../../../src/worker/drain';
import { countPlatformFetches } from '../support/platform-fetches';
import { drainRuntime, httpDatabase } from '../support/databases';
import { DEV, eventKinds, jobById, uniqueName } from './support/jobs';
import { waitFor } from '../../support/wait-for';

const fetches = countPlatformFetches();

async function waitingIn(queue: string): Promise<number> {
  const [row] = await httpDatabase(env).query<{ count: number }>({
    text: `SELECT count(*)::int AS count FROM skiplock.jobs WHERE queue = $1`,
    params: [queue],
  });
  return row!.count;
}

describe('a drain under a subrequest cap', () => {
  it('works a backlog of 500 through drains of 50 subrequests each, never crossing the cap, cutting no job off', async () => {
    const queue = uniqueName('capped');
    const enqueued = await enqueueBatch(
      httpDatabase(env),
      Array.from({ length: 500 }, () => ({ queue, type: 'noop' })),
    );
    const perDrain: number[] = [];

    for (let drain = 0; drain < 40 && (await waitingIn(queue)) > 0; drain++) {
      fetches.reset();
      const counts = await scheduledDrain(drainRuntime({ ...DEV, SUBREQUEST_LIMIT: '50' }), '* * * * *');
      if (!counts.drained) throw new Error('without a queue clock every tick drains');
      perDrain.push(fetches.count);
      expect(fetches.count).toBeLessThanOrEqual(50);
      // The drain's own count is what the platform saw.
      expect(counts.subrequests).toBe(fetches.count);
      expect(counts.leaseLost).toBe(0);
    }

    expect(await waitingIn(queue)).toBe(0);
    const sample = enqueued.filter((_, index) => index % 25 === 0);
    for (const { job } of sample) {
      // One attempt each: no job was started and then cut off by the cap.
      expect(await jobById(job.id)).toMatchObject({ status: 'succeeded', attempts: 1 });
      expect(await eventKinds(job.id)).not.toContain('lease_expired');
    }
    console.log(
      JSON.stringify({ event: 'capped-drains', jobs: 500, drains: perDrain.length, subrequestsPerDrain: perDrain }),
    );
  });

  it('SUBREQUEST_LIMIT wins over WORKERS_PLAN, and either one unreadable is refused by name', () => {
    expect(drainRuntime({ WORKERS_PLAN: 'paid' }).settings.drain.subrequestLimit).toBe(1000);
    expect(drainRuntime({}).settings.drain.subrequestLimit).toBe(50);
    expect(drainRuntime({ WORKERS_PLAN: 'paid', SUBREQUEST_LIMIT: '10000' }).settings.drain.subrequestLimit).toBe(
      10000,
    );
    expect(() => drainRuntime({ SUBREQUEST_LIMIT: '0' })).toThrow(
      /SUBREQUEST_LIMIT must be a whole number from 1, not "0"/,
    );
    expect(() => drainRuntime({ SUBREQUEST_LIMIT: '12.5' })).toThrow(/SUBREQUEST_LIMIT must be a whole number/);
    expect(() => drainRuntime({ WORKERS_PLAN: 'enterprise' })).toThrow(
      /WORKERS_PLAN must be free or paid, not "enterprise"/,
    );
  });
});

describe('fast paths coalesce', () => {
  const started: Array<Promise<unknown>> = [];
  const ctx = { waitUntil: (promise: Promise<unknown>) => void started.push(promise) };
  beforeEach(() => {
    started.length = 0;
  });

  it('a burst of 100 enqueue requests in one isolate starts one fast-path drain, which runs every job', async () => {
    const runtime = drainRuntime({ ...DEV, WORKERS_PLAN: 'paid' });
    const enqueued = await enqueueBatch(
      httpDatabase(env),
      Array.from({ length: 100 }, () => ({ queue: uniqueName('burst'), type: 'noop' })),
    );

    for (let request = 0; request < 100; request++) fastPathDrain(runtime, ctx);
    await Promise.all(started);

    expect(started).toHaveLength(1);
    const finished = await Promise.all(enqueued.map(({ job }) => jobById(job.id)));
    expect(finished.filter((job) => job.status !== 'succeeded')).toEqual([]);
  });

  it('an enqueue while the drain runs is claimed by that drain; one after it ended starts another', async () => {
    const runtime = drainRuntime({ ...DEV, WORKERS_PLAN: 'paid' });
    const [long] = await enqueueBatch(httpDatabase(env), [
      { queue: uniqueName('long'), type: 'sleep', payload: { ms: 1000 } },
    ]);
    fastPathDrain(runtime, ctx);

    // The drain runs the long job: what is enqueued now arrives while it still claims.
    await waitFor(
      'the fast-path drain to run the long job',
      async () => (await jobById(long!.job.id)).status === 'running',
    );
    const [during] = await enqueueBatch(httpDatabase(env), [{ queue: uniqueName('during'), type: 'noop' }]);
    fastPathDrain(runtime, ctx);
    expect(started).toHaveLength(1);
    await Promise.all(started);
    expect(await jobById(long!.job.id)).toMatchObject({ status: 'succeeded' });
    expect(await jobById(during!.job.id)).toMatchObject({ status: 'succeeded' });

    const [after] = await enqueueBatch(httpDatabase(env), [{ queue: uniqueName('after'), type: 'noop' }]);
    fastPathDrain(runtime, ctx);
    expect(started).toHaveLength(2);
    await Promise.all(started);
    expect(await jobById(after!.job.id)).toMatchObject({ status: 'succeeded' });
  });

  it('enqueues as separate requests, each in its own I/O context, share one drain safely and every job runs', async () => {
    const errors = vi.spyOn(console, 'error');
    const queue = uniqueName('requests');
    const enqueueOne = () =>
      exports.default.fetch(
        new Request(`http://skiplock.test/v1/queues/${queue}/jobs`, {
          method: 'POST',
          headers: { authorization: `Bearer ${env.ADMIN_TOKEN}`, 'content-type': 'application/json' },
          // A host no allow-list names: the job fails for good at its first attempt, which the fast path makes.
          body: JSON.stringify({ type: 'http', payload: { url: 'https://not-allowed.example.com/' } }),
        }),
      );

    const answers = await Promise.all(Array.from({ length: 40 }, enqueueOne));
    const ids = await Promise.all(answers.map(async (answer) => ((await answer.json()) as { id: string }).id));
    const jobs = await waitFor('the 40 jobs to fail at their first attempt', async () => {
      const now = await Promise.all(ids.map(jobById));
      return now.every((job) => job.status === 'failed') && now;
    });

    expect(answers.map((answer) => answer.status)).toEqual(Array(40).fill(201));
    expect(jobs.map((job) => [job.status, job.attempts])).toEqual(Array(40).fill(['failed', 1]));
    expect(
      errors.mock.calls.map((call) => String(call[0])).filter((line) => /drain failed|different request/.test(line)),
    ).toEqual([]);
    errors.mockRestore();
  });
});
