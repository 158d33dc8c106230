import { describe, expect, it } from 'vitest';
import { call, createKey, expectJson, stack, uniqueName } from './support/api';

/**
 * The third security review (issue 37), against `npm start` on a fresh
 * checkout. Finding 3 (a released live worker) is a fault scenario:
 * test/faults/10-worker-release.test.ts.
 */
const admin = stack.adminToken;

async function enqueue(queue: string, body: Record<string, unknown> = {}): Promise<{ id: string; runAt: string }> {
  return expectJson(await call(`/v1/queues/${queue}/jobs`, { key: admin, body }), 201);
}

describe('1: a key without read changes jobs but never reads them', () => {
  it('gets id and status only from PATCH, cancel and retry of a job it did not make', async () => {
    const queue = uniqueName('sec-no-read');
    const job = await enqueue(queue, { payload: { secret: 'card-on-file' }, delaySeconds: 3600 });
    const enqueueOnly = await createKey(['enqueue']);

    const answers = [
      await expectJson(await call(`/v1/jobs/${job.id}`, { key: enqueueOnly, method: 'PATCH', body: { priority: 3 } }), 200),
      await expectJson(await call(`/v1/jobs/${job.id}/cancel`, { key: enqueueOnly, method: 'POST' }), 200),
      await expectJson(await call(`/v1/jobs/${job.id}/retry`, { key: enqueueOnly, method: 'POST' }), 200),
    ];

    expect(answers).toEqual([
      { id: job.id, status: 'scheduled' },
      { id: job.id, status: 'cancelled' },
      { id: job.id, status: 'queued' },
    ]);
    expect(JSON.stringify(answers)).not.toContain('card-on-file');
  });
});

describe('4: framing headers in an http job', () => {
  it('are refused at enqueue, naming each, with nothing stored', async () => {
    const queue = uniqueName('sec-framing');
    const headers = { host: 'internal.example', 'Content-Length': '2', 'transfer-encoding': 'chunked', 'proxy-connection': 'x' };

    const refused = await call(`/v1/queues/${queue}/jobs`, {
      key: admin,
      body: { type: 'http', payload: { url: 'https://hooks.example.com/in', headers, body: { a: 1 } } },
    });
    const problem = await expectJson<{ errors: { path: string }[] }>(refused, 422);
    const listed = await expectJson<{ jobs: unknown[] }>(await call(`/v1/jobs?queue=${queue}`, { key: admin }), 200);

    expect(problem.errors.map((error) => error.path).sort()).toEqual(Object.keys(headers).map((name) => `payload.headers.${name}`).sort());
    expect(listed.jobs).toEqual([]);
  });
});

describe('5: a change of priority alone', () => {
  it("keeps the job's start time: a job due in two hours stays scheduled", async () => {
    const job = await enqueue(uniqueName('sec-priority'), { delaySeconds: 7200 });

    const changed = await expectJson(await call(`/v1/jobs/${job.id}`, { key: admin, method: 'PATCH', body: { priority: 3 } }), 200);

    expect(changed).toMatchObject({ id: job.id, status: 'scheduled', priority: 3, runAt: job.runAt });
  });
});

describe('6: the local stack fires its drains, web pages cannot', () => {
  it('answers a page 404 on /__scheduled (no --test-scheduled) and 403 on the handler route npm start fires through', async () => {
    const origin = { Origin: 'http://evil.example' };

    const testScheduled = await call('/__scheduled?cron=*+*+*+*+*', { headers: origin });
    const handlerRoute = await call('/cdn-cgi/handler/scheduled?cron=*+*+*+*+*', { headers: origin });
    await Promise.all([testScheduled.body?.cancel(), handlerRoute.body?.cancel()]);

    expect([testScheduled.status, handlerRoute.status]).toEqual([404, 403]);
  });
});
