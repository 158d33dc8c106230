import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test';
import { describe, expect, it } from 'vitest';
import worker from '../../../src/worker';
import { fastPathDrain } from '../../../src/worker/drain';
import { drainRuntime } from '../support/databases';
import { runScheduled } from '../support/run-scheduled';
import { DEV, enqueueJob, eventKinds, jobById } from './support/jobs';

/**
 * scheduled() and the fast path, as deployed: the Worker's own registry (the
 * built-in jobs, the demo jobs in dev mode). Other test files drain the same
 * database, so every assertion here holds whichever drain ran the job.
 */
describe('the Worker drain', () => {
  it('runs a 6 s job with a 2 s lease to the end in one attempt: heartbeats keep the lease', async () => {
    const job = await enqueueJob({ type: 'sleep', payload: { ms: 6000 }, leaseSeconds: 2 });

    await runScheduled(worker, '* * * * *', new Date(), DEV);

    expect(await jobById(job.id)).toMatchObject({
      status: 'succeeded',
      attempts: 1,
      result: { ok: true, sleptMs: 6000 },
    });
    expect(await eventKinds(job.id)).not.toContain('lease_expired');
  });

  it('fails a job whose payload does not fit its schema for good, saying why', async () => {
    const job = await enqueueJob({ type: 'sleep', payload: { ms: 'a while' }, maxAttempts: 5 });

    await runScheduled(worker, '* * * * *', new Date(), DEV);

    const failed = await jobById(job.id);
    expect(failed).toMatchObject({
      status: 'failed',
      attempts: 1,
      lastError: { name: 'InvalidPayloadError', issues: [{ path: 'ms' }] },
    });
  });

  it('refuses an http delivery to a host that is not on HTTP_ALLOWED_HOSTS', async () => {
    const job = await enqueueJob({ type: 'http', payload: { url: 'https://not-allowed.example.com/hook' } });

    await runScheduled(worker, '* * * * *', new Date(), { HTTP_ALLOWED_HOSTS: 'hooks.example.com' });

    expect(await jobById(job.id)).toMatchObject({
      status: 'failed',
      attempts: 1,
      lastError: { name: 'PermanentError', message: expect.stringMatching(/not-allowed\.example\.com is not/) },
    });
  });

  it('fast path: drains right after an enqueue, inside waitUntil', async () => {
    const job = await enqueueJob({ type: 'noop' });
    const ctx = createExecutionContext();

    fastPathDrain(drainRuntime(DEV), ctx);
    await waitOnExecutionContext(ctx);

    const done = await jobById(job.id);
    expect(done).toMatchObject({ status: 'succeeded', result: { ok: true } });
    // Measured, not asserted: how long the job waited from enqueue to start.
    console.log(
      JSON.stringify({
        event: 'fast-path-latency',
        enqueueToStartMs: Date.parse(done.startedAt!) - Date.parse(done.createdAt),
      }),
    );
  });

  it('fast path: FAST_PATH=off starts nothing', () => {
    const started: Array<Promise<unknown>> = [];

    fastPathDrain(drainRuntime({ ...DEV, FAST_PATH: 'off' }), { waitUntil: (promise) => void started.push(promise) });

    expect(started).toEqual([]);
  });
});
