import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test';
import { env, exports } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import worker from '../../src/worker';
import { createKey } from './http/support/api';

const operator = { authorization: `Bearer ${env.ADMIN_TOKEN}` };

/** The Worker with a database that does not exist on the same server and proxy: only the round trip can fail. */
async function withMissingDatabase(headers: Record<string, string> = {}): Promise<Response> {
  const missingDatabase = new URL(env.DATABASE_URL);
  missingDatabase.pathname = '/skiplock_no_such_database';
  const ctx = createExecutionContext();
  const response = await worker.fetch(
    new Request('http://skiplock.test/healthz', { headers }),
    { ...env, DATABASE_URL: missingDatabase.href },
    ctx,
  );
  await waitOnExecutionContext(ctx);
  return response;
}

describe('GET /healthz in workerd', () => {
  it('answers 200 after a round trip to Postgres through the Neon HTTP driver: up, and nothing more without a key', async () => {
    const response = await exports.default.fetch('http://skiplock.test/healthz');

    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: 'ok' });
  });

  it("shows the round trip's latency to an operator key only", async () => {
    const tenantKey = await createKey(['read'], 'health-tenant');
    const asOperator = await exports.default.fetch('http://skiplock.test/healthz', { headers: operator });
    const asTenant = await exports.default.fetch('http://skiplock.test/healthz', {
      headers: { authorization: `Bearer ${tenantKey}` },
    });
    const badKey = await exports.default.fetch('http://skiplock.test/healthz', {
      headers: { authorization: 'Bearer nope' },
    });

    expect(await asOperator.json()).toEqual({ status: 'ok', database: { ok: true, latencyMs: expect.any(Number) } });
    expect(await asTenant.json()).toEqual({ status: 'ok' });
    expect(badKey.status).toBe(401);
  });

  it("answers 503 when that round trip fails, with the database's words for an operator key only", async () => {
    const anonymous = await withMissingDatabase();
    const asOperator = await withMissingDatabase(operator);

    expect(anonymous.status).toBe(503);
    expect(anonymous.headers.get('content-type')).toBe('application/problem+json');
    const problem = await anonymous.json<{ detail: string; requestId: string }>();
    expect(problem).toMatchObject({ detail: 'the database did not answer', requestId: expect.any(String) });
    // Postgres's own error, passed back through the proxy and the driver, for the operator.
    expect(asOperator.status).toBe(503);
    expect(await asOperator.json()).toMatchObject({ detail: expect.stringMatching(/does not exist/) });
  });
});
