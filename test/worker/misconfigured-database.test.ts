import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createSkiplock } from 'skiplock/worker';
import { httpDatabase } from './support/databases';

/** A database on the test server that no one migrated. */
const UNMIGRATED = `skiplock_unmigrated_${crypto.randomUUID().replaceAll('-', '')}`;

/**
 * The Worker's variables with a Hyperdrive binding to that database, as a deploy that skipped `skiplock migrate` has.
 * The binding points at Postgres itself, not through Miniflare's Hyperdrive proxy: that proxy has no 'error'
 * listener on workerd's sockets (cloudflare/workers-sdk#15768), and a socket workerd resets when the request
 * ends crashes the test run's process there.
 */
function overUnmigratedHyperdrive() {
  const { DATABASE_URL, ...rest } = env;
  const url = new URL(DATABASE_URL);
  url.pathname = `/${UNMIGRATED}`;
  return { ...rest, HYPERDRIVE: { connectionString: url.href } };
}

/** A request with the same env object each time, as an isolate gives its requests. */
async function call(worker: ReturnType<typeof createSkiplock>, vars: object, path: string, init: RequestInit = {}) {
  const ctx = createExecutionContext();
  const response = await worker.fetch(new Request(`http://skiplock.test${path}`, init), vars as typeof env, ctx);
  await waitOnExecutionContext(ctx);
  return response;
}

/** A new Worker's first enqueue, job list and /healthz over `vars`, and the lines it logged as errors meanwhile. */
async function firstRequests(vars: object): Promise<{ responses: Response[]; logged: string[] }> {
  const log = vi.spyOn(console, 'error').mockImplementation(() => {});
  try {
    const worker = createSkiplock();
    const headers = { authorization: `Bearer ${env.ADMIN_TOKEN}`, 'content-type': 'application/json' };
    const responses = [
      await call(worker, vars, '/v1/queues/noop/jobs', { method: 'POST', headers, body: '{}' }),
      await call(worker, vars, '/v1/jobs', { headers }),
      await call(worker, vars, '/healthz'),
    ];
    return { responses, logged: log.mock.calls.map((line) => String(line[0])) };
  } finally {
    log.mockRestore();
  }
}

const SAYS_MIGRATE = "the database is missing skiplock's schema: run `npx skiplock migrate` against it";

describe('a Hyperdrive database without skiplock schema', () => {
  beforeAll(async () => {
    await httpDatabase().query({ text: `CREATE DATABASE ${UNMIGRATED}`, params: [] });
  });
  afterAll(async () => {
    await httpDatabase().query({ text: `DROP DATABASE IF EXISTS ${UNMIGRATED} WITH (FORCE)`, params: [] });
  });

  it('answers the first request and /healthz with 503 and one line saying to run skiplock migrate, logged once', async () => {
    const { responses, logged } = await firstRequests(overUnmigratedHyperdrive());

    for (const response of responses) {
      expect(response.status).toBe(503);
      expect(await response.json()).toMatchObject({ detail: SAYS_MIGRATE });
    }
    expect(logged.filter((line) => line.includes('skiplock migrate'))).toEqual([`skiplock: ${SAYS_MIGRATE}`]);
  });
});

/** The Worker's variables with DATABASE_URL at a plain local Postgres and no local Neon proxy: `.dev.vars` as a new user first writes it. */
function overPlainLocalPostgres() {
  const { LOCAL_NEON_PROXY, ...rest } = env;
  return { ...rest, DATABASE_URL: 'postgres://app:secret@127.0.0.1:5432/app' };
}

describe("a DATABASE_URL Neon's HTTP driver cannot reach", () => {
  it('answers the first request and /healthz with 503 misconfigured, its log naming the fixes in one line, once', async () => {
    const { responses, logged } = await firstRequests(overPlainLocalPostgres());

    for (const response of responses) {
      expect(response.status).toBe(503);
      expect(await response.json()).toMatchObject({
        type: expect.stringMatching(/misconfigured$/),
        detail: 'this Worker is not configured: see its log',
      });
    }
    expect(logged).toEqual([
      "skiplock: DATABASE_URL points at 127.0.0.1, which Neon's HTTP driver cannot reach (it speaks HTTP to Neon's endpoints): " +
        'for a local or other Postgres bind HYPERDRIVE (with localConnectionString under wrangler dev), or give a Neon connection string',
    ]);
  });
});
