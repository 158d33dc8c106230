import { Webhook } from 'standardwebhooks';
import { z } from 'zod';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/types';
import { defineJob } from '../../src/drain/define-job';
import { httpJob } from '../../src/drain/handlers/http';
import { httpEndpointSecret } from '../../src/drain/handlers/http-signature';
import { PermanentError } from '../../src/drain/job-errors';
import { cancel, enqueue, getJobEvents, InvalidInputError, reschedule, retry, type JobEvent } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';
import { drain, jobById } from './support/drain';
import { startReceiver } from './support/receiver';

const open = engineDatabases();
const SECRET = 'callback-signing-secret';

/** A receiver on 127.0.0.1: /flaky… answers 500 to its first request and 200 after; anything else 200. */
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let base: string;
let port: number;

beforeAll(async () => {
  receiver = await startReceiver(({ path }, earlier) => ({
    status: path.startsWith('/flaky') && !earlier.some((request) => request.path === path) ? 500 : 200,
  }));
  ({ port, base } = receiver);
});

afterAll(() => receiver.close());

const report = defineJob('report', z.object({ fail: z.boolean() }), async ({ fail }) => {
  if (fail) throw new PermanentError('the report cannot be made');
  return { rows: 7 };
});

/** The job types a drain runs here: the test's own, and the http job that delivers callbacks to the receiver. */
const jobs = () => [report, httpJob({ allowedHosts: [`127.0.0.1:${port}`], signingSecret: SECRET })];

/** Drains until nothing is left that is ready: a callback is enqueued by the completion that ends its job. */
async function drainAll(db: Db): Promise<void> {
  for (let round = 0; round < 5; round++) {
    const counts = await drain(db, jobs());
    if (counts.claimed === 0) return;
  }
}

async function deliveries(db: Db): Promise<Array<{ id: string; state: string; url: string; body: unknown }>> {
  return db.query({
    text: `SELECT id, state, payload->>'url' AS url, payload->'body' AS body FROM skiplock.all_jobs
           WHERE queue = 'skiplock.callbacks' ORDER BY id`,
    params: [],
  });
}

function callbackEvents(events: JobEvent[]): JobEvent[] {
  return events.filter((event) => event.kind.startsWith('callback_'));
}

describe('completion callbacks', () => {
  it('announce a success to callbackUrl as a Standard Webhooks POST that the reference verifier accepts, shown in the history', async () => {
    const { db } = await open('pg');
    const url = `${base}/done?source=report`;
    const { job } = await enqueue(db, {
      queue: 'reports',
      type: 'report',
      tenant: 'acme',
      payload: { fail: false },
      callbackUrl: url,
      failureCallbackUrl: `${base}/failed`,
    });
    expect(job).toMatchObject({ callbackUrl: url, failureCallbackUrl: `${base}/failed` });

    await drainAll(db);

    const finished = await jobById(db, job.id);
    expect(finished).toMatchObject({ status: 'succeeded', callbackUrl: url });
    const [delivery] = await deliveries(db);
    expect(delivery).toMatchObject({ state: 'succeeded', url });
    const [request, ...again] = receiver.at('/done?source=report');
    expect(again).toEqual([]);
    expect(receiver.at('/failed')).toEqual([]);
    expect(JSON.parse(request!.body)).toEqual({
      type: 'job.succeeded',
      timestamp: finished.finishedAt,
      data: {
        id: job.id,
        queue: 'reports',
        type: 'report',
        tenant: 'acme',
        status: 'succeeded',
        attempts: 1,
        maxAttempts: 5,
        createdAt: finished.createdAt,
        startedAt: finished.startedAt,
        finishedAt: finished.finishedAt,
        durationMs: finished.durationMs,
        result: { rows: 7 },
        lastError: null,
      },
    });
    // The delivery is the callback job's: its id is the webhook-id, the same on every attempt.
    expect(request!.headers).toMatchObject({ 'webhook-id': delivery!.id, 'skiplock-tenant': 'acme' });
    const verifier = new Webhook(await httpEndpointSecret(SECRET, { tenant: 'acme', url }));
    expect(() => verifier.verify(request!.body, request!.headers as Record<string, string>)).not.toThrow();

    const history = await getJobEvents(db, job.id);
    expect(history.map((event) => event.kind)).toEqual([
      'enqueued',
      'claimed',
      'completed',
      'callback_enqueued',
      'callback_delivered',
    ]);
    expect(callbackEvents(history)).toMatchObject([
      { kind: 'callback_enqueued', attempt: 1, detail: { callbackJobId: delivery!.id, url, event: 'job.succeeded' } },
      {
        kind: 'callback_delivered',
        attempt: 1,
        detail: { callbackJobId: delivery!.id, deliveryAttempt: 1, status: 200 },
      },
    ]);
  });

  it('announce a failure to failureCallbackUrl, retrying a failed delivery with backoff, and again when the job is retried', async () => {
    const { db } = await open('pg');
    const url = `${base}/flaky/${crypto.randomUUID()}`;
    const { job } = await enqueue(db, {
      queue: 'reports',
      type: 'report',
      payload: { fail: true },
      callbackUrl: `${base}/done-never`,
      failureCallbackUrl: url,
    });

    await drainAll(db);

    // The receiver answered 500: the delivery waits out its backoff (10 s and up), the job's history says so.
    const [delivery] = await deliveries(db);
    expect(delivery).toMatchObject({
      state: 'retrying',
      url,
      body: { type: 'job.failed', data: { status: 'failed' } },
    });
    expect((delivery!.body as { data: { lastError: { message: string } } }).data.lastError.message).toBe(
      'the report cannot be made',
    );
    let history = callbackEvents(await getJobEvents(db, job.id));
    expect(history).toMatchObject([
      { kind: 'callback_enqueued', detail: { callbackJobId: delivery!.id, event: 'job.failed', url } },
      {
        kind: 'callback_failed',
        detail: {
          callbackJobId: delivery!.id,
          deliveryAttempt: 1,
          error: { message: `${base} answered 500: answer 500` },
        },
      },
    ]);
    const retryAt = Date.parse((history[1]!.detail as { retryAt: string }).retryAt);
    expect(retryAt).toBeGreaterThan(Date.parse(history[1]!.at));

    // Its next attempt, brought forward, is delivered.
    await reschedule(db, delivery!.id, { delaySeconds: 0 });
    await drainAll(db);
    history = callbackEvents(await getJobEvents(db, job.id));
    expect(history.map((event) => event.kind)).toEqual(['callback_enqueued', 'callback_failed', 'callback_delivered']);
    expect(history[2]!.detail).toMatchObject({ deliveryAttempt: 2, status: 200 });
    expect(receiver.at(new URL(url).pathname)).toHaveLength(2);

    // A retried job ends again, and announces that end too.
    await retry(db, job.id);
    await drainAll(db);
    const all = await deliveries(db);
    expect(all.map((row) => row.state)).toEqual(['succeeded', 'succeeded']);
    expect(callbackEvents(await getJobEvents(db, job.id)).map((event) => event.kind)).toEqual([
      'callback_enqueued',
      'callback_failed',
      'callback_delivered',
      'callback_enqueued',
      'callback_delivered',
    ]);
    expect(receiver.at('/done-never')).toEqual([]);
  });

  it('announce a cancellation to failureCallbackUrl, and nothing where no URL is given for the outcome', async () => {
    const { db } = await open('pg');
    const cancelled = await enqueue(db, {
      queue: 'reports',
      type: 'report',
      payload: { fail: false },
      failureCallbackUrl: `${base}/cancelled`,
    });
    const failedWithoutUrl = await enqueue(db, {
      queue: 'reports',
      type: 'report',
      payload: { fail: true },
      callbackUrl: `${base}/done-only`,
    });
    await cancel(db, cancelled.job.id);
    await drainAll(db);

    const all = await deliveries(db);
    expect(all).toHaveLength(1);
    expect(all[0]).toMatchObject({
      state: 'succeeded',
      body: { type: 'job.cancelled', data: { id: cancelled.job.id } },
    });
    expect(receiver.at('/cancelled')).toHaveLength(1);
    expect(receiver.at('/done-only')).toEqual([]);
    expect(await jobById(db, failedWithoutUrl.job.id)).toMatchObject({ status: 'failed' });
    expect(callbackEvents(await getJobEvents(db, failedWithoutUrl.job.id))).toEqual([]);
  });

  it('are refused at enqueue unless they are http(s) URLs, naming the field, and nothing is stored', async () => {
    const { db } = await open('pg');
    for (const [field, url] of [
      ['callbackUrl', 'ftp://files.example.com/x'],
      ['failureCallbackUrl', 'not a url'],
      ['callbackUrl', `https://example.com/${'x'.repeat(2048)}`],
    ] as const) {
      const refused = enqueue(db, { queue: 'reports', [field]: url });
      await expect(refused).rejects.toThrow(InvalidInputError);
      await expect(refused).rejects.toMatchObject({ field: `jobs.0.${field}` });
    }
    // A raw insert is held to the same rule by the table's constraints.
    await expect(
      db.query({
        text: `INSERT INTO skiplock.jobs (queue, type, callback_url) VALUES ('reports', 'report', 'javascript:alert(1)')`,
        params: [],
      }),
    ).rejects.toMatchObject({ code: '23514', constraint: 'callback_url_http' });
    expect(await db.query({ text: 'SELECT 1 FROM skiplock.all_jobs', params: [] })).toEqual([]);
  });
});
