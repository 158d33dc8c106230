import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { pgDb } from '../../src/db/pg';
import { defineWebhookDelivery, httpEndpointSecret } from '../../src/drain';
import { startWorker, type RunningWorker } from '../../src/node-worker';
import { call, createKey, expectJson, stack, uniqueName, workerVariables } from './support/api';
import { waitFor } from '../support/wait-for';

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
      await expectJson(
        await call(`/v1/jobs/${job.id}`, { key: enqueueOnly, method: 'PATCH', body: { priority: 3 } }),
        200,
      ),
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

describe('2: webhook batches keep to one tenant', () => {
  interface Post {
    headers: IncomingHttpHeaders;
    body: string;
  }
  const posts: Post[] = [];
  let server: Server | undefined;
  let worker: RunningWorker | undefined;
  afterAll(async () => {
    await worker?.stop();
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
  });

  async function jobOf(id: string) {
    return expectJson<{ status: string; attempts: number; lastError: unknown }>(
      await call(`/v1/jobs/${id}`, { key: admin }),
      200,
    );
  }

  it("never fails or shows one tenant's jobs in another's: a POST per tenant, signed for it, a refused POST retried job by job", async () => {
    // A receiver that refuses a POST over 400 KB with 413, echoing the start of what it got.
    server = createServer((request, response) => {
      let body = '';
      request.on('data', (chunk: Buffer) => (body += chunk.toString()));
      request.on('end', () => {
        posts.push({ headers: request.headers, body });
        if (body.length > 400_000) response.writeHead(413).end(body.slice(0, 400));
        else response.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/ingest`;
    const signingSecret = 'the security suite signs its webhook batches with this';
    // The Worker's drains do not know this type, so only this Node worker delivers its jobs.
    const type = uniqueName('sec-batch');
    const delivery = defineWebhookDelivery(type, z.unknown(), {
      url,
      signingSecret,
      maxBatchBytes: 4 * 1024 * 1024,
      backoff: { baseSeconds: 0.05, maxSeconds: 0.1 },
    });
    worker = await startWorker({
      databaseUrl: (await workerVariables()).DATABASE_URL!,
      handlers: [delivery],
      concurrency: 10,
      pollIntervalMs: 100,
      housekeepingIntervalMs: 0,
      logger: { info: () => {}, warn: () => {}, error: () => {} },
    });
    const queue = uniqueName('sec-batch');
    // Five of 150 KB: within the API's 1 MiB body, above what the receiver takes in one POST.
    const big = 'x'.repeat(150_000);
    const { jobs } = await expectJson<{ jobs: { id: string }[] }>(
      await call(`/v1/queues/${queue}/jobs/batch`, {
        key: admin,
        body: {
          jobs: [
            ...Array.from({ length: 5 }, (_, n) => ({ type, tenant: 'acme', payload: { big, n } })),
            { type, tenant: 'globex', payload: { small: true } },
          ],
        },
      }),
      201,
    );

    const ended = await waitFor('the six jobs to end', async () => {
      const now = await Promise.all(jobs.map((job) => jobOf(job.id)));
      return now.every((job) => ['succeeded', 'failed'].includes(job.status)) && now;
    });
    const globexHistory = await call(`/v1/jobs/${jobs[5]!.id}/history`, { key: admin }).then((response) =>
      response.text(),
    );

    expect(ended[5]).toMatchObject({ status: 'succeeded', attempts: 1, lastError: null });
    expect(globexHistory).not.toContain('acme');
    expect(ended.slice(0, 5).map((job) => job.status)).toEqual(Array(5).fill('succeeded'));
    for (const post of posts) {
      const tenants = new Set(
        (JSON.parse(post.body) as { data: { jobs: { tenant: string }[] } }).data.jobs.map((job) => job.tenant),
      );
      expect(tenants.size).toBe(1);
      const [tenant] = [...tenants];
      const secretFor = (who: string) => httpEndpointSecret(signingSecret, { tenant: who, url });
      const headers = post.headers as Record<string, string>;
      new Webhook(await secretFor(tenant!)).verify(post.body, headers);
      await expect(
        secretFor(tenant === 'acme' ? 'globex' : 'acme').then((other) => new Webhook(other).verify(post.body, headers)),
      ).rejects.toThrow();
    }
  });

  it("hides a queue's delivery target from a tenant-bound key", async () => {
    const queue = uniqueName('sec-target');
    const db = pgDb((await workerVariables()).DATABASE_URL!, { max: 1 });
    try {
      await db.query({
        text: `INSERT INTO skiplock.queues (name, delivery) VALUES ($1, $2)`,
        params: [queue, { target: 'webhook', url: 'https://hooks.example.com/private-path' }],
      });
    } finally {
      await db.close();
    }
    const tenantKey = await createKey(['read'], uniqueName('sec-target-tenant'));

    const asTenant = await expectJson(await call(`/v1/queues/${queue}`, { key: tenantKey }), 200);
    const asAdmin = await expectJson(await call(`/v1/queues/${queue}`, { key: admin }), 200);

    expect(asTenant).not.toHaveProperty('delivery');
    expect(JSON.stringify(asTenant)).not.toContain('private-path');
    expect(asAdmin).toMatchObject({ delivery: { url: 'https://hooks.example.com/private-path' } });
  });
});

describe('4: framing headers in an http job', () => {
  it('are refused at enqueue, naming each, with nothing stored', async () => {
    const queue = uniqueName('sec-framing');
    const headers = {
      host: 'internal.example',
      'Content-Length': '2',
      'transfer-encoding': 'chunked',
      'proxy-connection': 'x',
    };

    const refused = await call(`/v1/queues/${queue}/jobs`, {
      key: admin,
      body: { type: 'http', payload: { url: 'https://hooks.example.com/in', headers, body: { a: 1 } } },
    });
    const problem = await expectJson<{ errors: { path: string }[] }>(refused, 422);
    const listed = await expectJson<{ jobs: unknown[] }>(await call(`/v1/jobs?queue=${queue}`, { key: admin }), 200);

    expect(problem.errors.map((error) => error.path).sort()).toEqual(
      Object.keys(headers)
        .map((name) => `payload.headers.${name}`)
        .sort(),
    );
    expect(listed.jobs).toEqual([]);
  });
});

describe('5: a change of priority alone', () => {
  it("keeps the job's start time: a job due in two hours stays scheduled", async () => {
    const job = await enqueue(uniqueName('sec-priority'), { delaySeconds: 7200 });

    const changed = await expectJson(
      await call(`/v1/jobs/${job.id}`, { key: admin, method: 'PATCH', body: { priority: 3 } }),
      200,
    );

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
