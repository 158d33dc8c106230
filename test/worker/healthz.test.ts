import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test';
import { env, exports } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import worker from '../../src/worker';

describe('GET /healthz in workerd', () => {
  it('answers 200 after a round trip to Postgres through the Neon HTTP driver', async () => {
    const response = await exports.default.fetch('http://skiplock.test/healthz');

    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ status: 'ok', database: { ok: true } });
  });

  it('answers 503 when that round trip fails', async () => {
    // Same server and proxy, a database that does not exist: only the round trip can fail.
    const missingDatabase = new URL(env.DATABASE_URL);
    missingDatabase.pathname = '/skiplock_no_such_database';
    const ctx = createExecutionContext();

    const response = await worker.fetch(
      new Request('http://skiplock.test/healthz'),
      { ...env, DATABASE_URL: missingDatabase.href },
      ctx,
    );
    await waitOnExecutionContext(ctx);

    expect(response.status).toBe(503);
    expect(response.headers.get('content-type')).toBe('application/problem+json');
    // Postgres's own error, passed back through the proxy and the driver.
    expect(await response.json()).toMatchObject({ detail: expect.stringMatching(/does not exist/) });
  });
});
