import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineJob, PermanentError } from 'skiplock/drain';
import {
  enqueue,
  enqueueBatch,
  getJob,
  InvalidInputError,
  jobHandle,
  JobNotSucceededError,
  JobWaitTimeoutError,
} from 'skiplock';
import { drain } from '../drain/support/drain';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();

const sendWelcome = defineJob(
  'send-welcome',
  z.object({ userId: z.number().int(), locale: z.enum(['en', 'fr']).default('en') }),
  ({ userId, locale }) => ({ sentTo: userId, greeting: locale === 'fr' ? 'bonjour' : 'hello' }),
);

const refuse = defineJob('refuse', z.object({ why: z.string() }), ({ why }) => {
  throw new PermanentError(why);
});

describe('typed jobs in the engine', () => {
  it('enqueues a checked payload into the queue named like the type, and the handle reads the typed result', async () => {
    const { db } = await open('pg');

    const handle = await enqueue(db, sendWelcome, { userId: 42 }, { tenant: 'acme' });
    expect(handle.job).toMatchObject({ queue: 'send-welcome', type: 'send-welcome', tenant: 'acme', status: 'queued' });
    expect((await handle.status()).status).toBe('queued');

    await drain(db, [sendWelcome]);
    const result = await handle.result({ timeoutMs: 5000 });
    // Typed by the handler: a wrong field here would not compile.
    const greeting: string = result.greeting;
    expect(greeting).toBe('hello');
    expect(result.sentTo).toBe(42);
  });

  it('refuses a payload that fails the schema before anything is stored, naming the field', async () => {
    const { db } = await open('pg');

    // @ts-expect-error -- userId is a number in the schema: this must not compile.
    const refused = enqueue(db, sendWelcome, { userId: 'not-a-number' });
    await expect(refused).rejects.toBeInstanceOf(InvalidInputError);
    await expect(refused).rejects.toMatchObject({ field: 'payload.userId' });
    // @ts-expect-error -- a batch is checked the same way, per payload.
    const batch = enqueueBatch(db, sendWelcome, [{ userId: 1 }, { userId: 2, locale: 'de' }]);
    await expect(batch).rejects.toMatchObject({ field: 'jobs.1.payload.locale' });

    const [row] = await db.query<{ count: number }>({
      text: 'SELECT count(*)::int AS count FROM skiplock.jobs',
      params: [],
    });
    expect(row!.count).toBe(0);
  });

  it("stores a job with its type's maxAttempts, or its own when lower", async () => {
    const { db } = await open('pg');
    const capped = defineJob('capped', z.object({}), () => null, { maxAttempts: 3 });

    expect((await enqueue(db, capped, {})).job.maxAttempts).toBe(3);
    expect((await enqueue(db, capped, {}, { maxAttempts: 10 })).job.maxAttempts).toBe(3);
    expect((await enqueue(db, capped, {}, { maxAttempts: 2 })).job.maxAttempts).toBe(2);
    const [batched] = await enqueueBatch(db, capped, [{}]);
    expect(batched!.job.maxAttempts).toBe(3);
    // A type without a cap leaves the job's own, or the default.
    expect((await enqueue(db, sendWelcome, { userId: 1 })).job.maxAttempts).toBe(5);
  });

  it('enqueues a batch in one statement, each with its handle, and a handle made from an id alone', async () => {
    const { db } = await open('neon-http');

    const handles = await enqueueBatch(db, sendWelcome, [{ userId: 1 }, { userId: 2, locale: 'fr' }], {
      queue: 'welcomes',
    });
    expect(handles.map((handle) => handle.job.queue)).toEqual(['welcomes', 'welcomes']);

    await drain(db, [sendWelcome]);
    const later = jobHandle<{ greeting: string }>(db, (await getJob(db, handles[1]!.id))!);
    expect((await later.result()).greeting).toBe('bonjour');
  });

  it('result() throws for a job that ended without success, and times out for one still waiting', async () => {
    const { db } = await open('pg');
    const failed = await enqueue(db, refuse, { why: 'no such user' });
    const waiting = await enqueue(db, sendWelcome, { userId: 7 }, { delaySeconds: 3600 });

    await drain(db, [refuse]);
    const ended = failed.result();
    await expect(ended).rejects.toBeInstanceOf(JobNotSucceededError);
    await expect(ended).rejects.toMatchObject({ job: { status: 'failed' } });
    await expect(waiting.result({ timeoutMs: 100 })).rejects.toBeInstanceOf(JobWaitTimeoutError);

    const cancelled = await waiting.cancel();
    expect(cancelled.outcome).toBe('cancelled');
    await expect(waiting.result()).rejects.toMatchObject({ job: { status: 'cancelled' } });
  });

  it('refuses to define a job type with an unusable name or options', () => {
    expect(() => defineJob('', z.unknown(), () => null)).toThrow(/a name is 1 to 128 characters/);
    expect(() => defineJob('x', z.unknown(), () => null, { maxAttempts: 0 })).toThrow(/maxAttempts/);
  });
});
