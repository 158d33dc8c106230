import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineJob, type JobContext } from '../../src/drain/define-job';
import { AttemptInterruptedError, PermanentError, RetryAfterError } from '../../src/drain/job-errors';
import { MAX_RESULT_BYTES } from '../../src/drain/job-result';
import { sleep } from '../../src/engine/sleep';
import { cancel, enqueue } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';
import { drain, eventKinds, jobById } from './support/drain';

const open = engineDatabases();

/** Waits until the attempt's signal fires and returns its reason. */
function untilStopped(context: JobContext): Promise<unknown> {
  return new Promise((resolve) => context.signal.addEventListener('abort', () => resolve(context.signal.reason)));
}

describe('the handler API', () => {
  it('hands the handler its parsed, typed payload and a context, and stores what it returns', async () => {
    const { db } = await open('pg');
    const seen: Array<{ name: string; times: number; attempt: number; jobId: string; aborted: boolean }> = [];
    const greet = defineJob(
      'greet',
      z.object({ name: z.string(), times: z.number().int().default(1) }),
      (payload, context) => {
        seen.push({ ...payload, attempt: context.attempt, jobId: context.job.id, aborted: context.signal.aborted });
        return { greeting: `hello ${payload.name}`.repeat(payload.times) };
      },
    );
    const { job } = await enqueue(db, { queue: 'greetings', type: 'greet', payload: { name: 'ada' } });

    const counts = await drain(db, [greet]);

    expect(seen).toEqual([{ name: 'ada', times: 1, attempt: 1, jobId: job.id, aborted: false }]);
    expect(counts).toMatchObject({ claimed: 1, succeeded: 1, failed: 0 });
    expect(await jobById(db, job.id)).toMatchObject({ status: 'succeeded', result: { greeting: 'hello ada' } });
  });

  it('saves progress and extends the lease through the context', async () => {
    const { db } = await open('pg');
    let leaseDuringRun: string | null = null;
    const steps = defineJob('steps', z.null(), async (_payload, context) => {
      await context.progress({ step: 1 });
      await context.extendLease(600);
      leaseDuringRun = (await jobById(db, context.job.id)).leaseExpiresAt;
    });
    const { job } = await enqueue(db, { queue: 'steps' });

    await drain(db, [steps]);

    expect(Date.parse(leaseDuringRun!) - Date.now()).toBeGreaterThan(500_000);
    expect(await jobById(db, job.id)).toMatchObject({ status: 'succeeded', progress: { step: 1 }, result: null });
    expect(await eventKinds(db, job.id)).toEqual([
      'enqueued',
      'claimed',
      'lease_extended',
      'lease_extended',
      'completed',
    ]);
  });

  it('fails a payload that does not fit the schema for good, with the issues, without running the handler', async () => {
    const { db } = await open('pg');
    let ran = false;
    const greet = defineJob('greet', z.object({ name: z.string() }), () => {
      ran = true;
    });
    const { job } = await enqueue(db, { queue: 'q', type: 'greet', payload: { name: 42 }, maxAttempts: 5 });

    const counts = await drain(db, [greet]);

    expect(ran).toBe(false);
    expect(counts).toMatchObject({ failed: 1, retrying: 0 });
    const failed = await jobById(db, job.id);
    expect(failed).toMatchObject({ status: 'failed', attempts: 1 });
    expect(failed.lastError).toMatchObject({
      name: 'InvalidPayloadError',
      message: expect.stringContaining('payload does not match the schema of job type "greet"'),
      issues: [{ path: 'name', message: expect.stringMatching(/expected string/i) }],
    });
  });

  it('checks a payload against a schema with an async refinement too: runs the ones that pass, fails the others for good', async () => {
    const { db } = await open('pg');
    const ran: string[] = [];
    const known = new Set(['ada']);
    const greet = defineJob(
      'greet',
      z.object({ name: z.string().refine(async (name) => known.has(name), 'unknown name') }),
      (payload) => {
        ran.push(payload.name);
      },
    );
    const { job: good } = await enqueue(db, { queue: 'q', type: 'greet', payload: { name: 'ada' } });
    const { job: bad } = await enqueue(db, { queue: 'q', type: 'greet', payload: { name: 'eve' } });

    await drain(db, [greet]);

    expect(ran).toEqual(['ada']);
    expect(await jobById(db, good.id)).toMatchObject({ status: 'succeeded' });
    expect((await jobById(db, bad.id)).lastError).toMatchObject({
      name: 'InvalidPayloadError',
      issues: [{ path: 'name', message: 'unknown name' }],
    });
  });

  it('retries after exactly the delay a RetryAfterError asks for', async () => {
    const { db } = await open('pg');
    const limited = defineJob('limited', z.unknown(), () => {
      throw new RetryAfterError(30, 'rate limited');
    });
    const { job } = await enqueue(db, { queue: 'limited' });

    await drain(db, [limited]);

    const retrying = await jobById(db, job.id);
    expect(retrying).toMatchObject({
      status: 'retrying',
      attempts: 1,
      lastError: { name: 'RetryAfterError', retryInSeconds: 30 },
    });
    const wait = (Date.parse(retrying.runAt) - Date.parse(retrying.finishedAt ?? new Date().toISOString())) / 1000;
    expect(wait).toBeGreaterThan(25);
    expect(wait).toBeLessThanOrEqual(31);
  });

  it('fails for good on PermanentError, with attempts left', async () => {
    const { db } = await open('pg');
    const refuse = defineJob('refuse', z.unknown(), () => {
      throw new PermanentError('the account is closed');
    });
    const { job } = await enqueue(db, { queue: 'refuse', maxAttempts: 10 });

    await drain(db, [refuse]);

    expect(await jobById(db, job.id)).toMatchObject({
      status: 'failed',
      attempts: 1,
      lastError: { name: 'PermanentError', message: 'the account is closed' },
    });
  });

  it("retries other errors with the type's backoff and stops at the type's maxAttempts", async () => {
    const { db } = await open('pg');
    let runs = 0;
    const flaky = defineJob(
      'flaky',
      z.unknown(),
      () => {
        runs += 1;
        throw new Error(`boom ${runs}`);
      },
      { maxAttempts: 2, backoff: { baseSeconds: 0.01, maxSeconds: 0.01 } },
    );
    const { job } = await enqueue(db, { queue: 'flaky', maxAttempts: 10 });

    const first = await drain(db, [flaky]);
    expect(first.retrying + first.failed).toBeGreaterThanOrEqual(1);
    await sleep(50);
    await drain(db, [flaky]);

    expect(runs).toBe(2);
    expect(await jobById(db, job.id)).toMatchObject({
      status: 'failed',
      attempts: 2,
      lastError: { message: 'boom 2' },
    });
  });

  it('fails for good a result larger than the cap, and stores no result for a handler that returns nothing', async () => {
    const { db } = await open('pg');
    const big = defineJob('big', z.unknown(), () => 'x'.repeat(MAX_RESULT_BYTES + 1));
    const nothing = defineJob('nothing', z.unknown(), () => undefined);
    const { job: bigJob } = await enqueue(db, { queue: 'big' });
    const { job: nothingJob } = await enqueue(db, { queue: 'nothing' });

    await drain(db, [big, nothing]);

    expect(await jobById(db, bigJob.id)).toMatchObject({
      status: 'failed',
      attempts: 1,
      result: null,
      lastError: { name: 'InvalidResultError', message: expect.stringContaining(`${MAX_RESULT_BYTES}-byte cap`) },
    });
    expect(await jobById(db, nothingJob.id)).toMatchObject({ status: 'succeeded', result: null });
  });

  it("stops an attempt at its type's timeout: the signal fires and the attempt fails", async () => {
    const { db } = await open('pg');
    const reasons: unknown[] = [];
    const slow = defineJob(
      'slow',
      z.unknown(),
      async (_payload, context) => reasons.push(await untilStopped(context)),
      {
        timeoutSeconds: 0.2,
      },
    );
    const { job } = await enqueue(db, { queue: 'slow', maxAttempts: 1 });

    await drain(db, [slow]);

    expect(reasons).toHaveLength(1);
    expect(await jobById(db, job.id)).toMatchObject({
      status: 'failed',
      lastError: { name: 'AttemptInterruptedError', why: 'timeout', message: expect.stringContaining('0.2 s') },
    });
  });

  it('lets a running handler see its cancellation at the next heartbeat, and ends the job cancelled', async () => {
    const { db } = await open('pg');
    const reasons: unknown[] = [];
    const waiting = defineJob('waiting', z.unknown(), async (_payload, context) => {
      await cancel(db, context.job.id);
      reasons.push(await untilStopped(context));
    });
    const { job } = await enqueue(db, { queue: 'waiting', leaseSeconds: 1 });

    const counts = await drain(db, [waiting]);

    expect(reasons[0]).toBeInstanceOf(AttemptInterruptedError);
    expect(reasons[0]).toMatchObject({ why: 'cancelled' });
    expect(counts).toMatchObject({ cancelled: 1, succeeded: 0 });
    expect(await jobById(db, job.id)).toMatchObject({
      status: 'cancelled',
      lastError: { name: 'AttemptInterruptedError', why: 'cancelled', message: 'the job was cancelled while it ran' },
    });
  });
});
