import { createExecutionContext, createScheduledController, waitOnExecutionContext } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { createClient } from 'skiplock/client';
import { describe, expect, it, vi } from 'vitest';
import worker from '../src/index.js';
// Type-only: the client learns the payload and result types, and bundles none of the job's code.
import type { sendWelcome, totalInvoice } from '../src/jobs.js';

/** The typed client, through the Worker's own fetch. */
const client = createClient('https://example.test', {
  apiKey: env.ADMIN_TOKEN,
  fetch: async (input, init) => {
    const ctx = createExecutionContext();
    const response = await worker.fetch(new Request(input, init), env, ctx);
    await waitOnExecutionContext(ctx);
    return response;
  },
});

async function cronDrain(): Promise<void> {
  await worker.scheduled(createScheduledController({ cron: '* * * * *' }), env);
}

describe('the example Worker', () => {
  it('enqueues over HTTP, runs the job in scheduled(), and reads its typed result', async () => {
    const welcome = await client.enqueue<typeof sendWelcome>('send-welcome', { userId: 42, locale: 'fr' });
    const invoice = await client.enqueue<typeof totalInvoice>('total-invoice', {
      invoiceId: 'inv-1',
      lines: [{ cents: 1250 }, { cents: 99 }],
    });

    await cronDrain();

    const { subject } = await welcome.result({ timeoutMs: 10_000 });
    const { totalCents } = await invoice.result({ timeoutMs: 10_000 });
    expect(subject).toBe('Bienvenue !');
    expect(totalCents).toBe(1349);
  });

  it('refuses a payload that does not fit the job type, naming the field', async () => {
    const wrong = { userId: 'not-a-number' };
    // @ts-expect-error -- userId is a number: a wrong payload must fail to compile.
    await expect(client.enqueue<typeof sendWelcome>('send-welcome', wrong)).rejects.toMatchObject({
      status: 422,
      problem: { errors: [{ path: 'payload.userId' }] },
    });
  });

  it('serves the dashboard and the API description', async () => {
    const page = await worker.fetch(new Request('https://example.test/'), env, createExecutionContext());
    const openapi = await worker.fetch(
      new Request('https://example.test/v1/openapi.json'),
      env,
      createExecutionContext(),
    );

    expect(page.headers.get('content-type')).toMatch(/text\/html/);
    expect((await openapi.json<{ paths: object }>()).paths).toHaveProperty('/v1/queues/{queue}/jobs');
  });

  it('drains at the tick after an enqueue, and not at a tick with nothing due (the queue clock)', async () => {
    const drainLines = async () => {
      const log = vi.spyOn(console, 'log');
      try {
        await cronDrain();
        return log.mock.calls.filter(([line]) => String(line).includes('"event":"drain"')).length;
      } finally {
        log.mockRestore();
      }
    };
    const job = await client.enqueue<typeof sendWelcome>('send-welcome', { userId: 7 });

    expect(await drainLines()).toBe(1);
    expect((await job.status()).status).toBe('succeeded');
    expect(await drainLines()).toBe(0);
  });
});
