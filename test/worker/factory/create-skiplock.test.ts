import { createExecutionContext, createScheduledController, waitOnExecutionContext } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import { Hono } from 'hono';
import { describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { createClient, SkiplockApiError } from 'skiplock/client';
import { enqueue, neonHttpDb } from 'skiplock';
import { createSkiplock, defineJob, definePeriodicJob, type Skiplock } from 'skiplock/worker';
import { QueueClock } from '../../../src/worker/queue-clock';
import { waitFor } from '../../support/wait-for';

/** Job types of a user's own Worker: one checked by the API at enqueue, one run on a schedule. */
const greet = defineJob('factory-greet', z.object({ name: z.string().min(1) }), ({ name }) => ({
  greeting: `hello ${name}`,
}));
const tick = defineJob('factory-tick', z.object({ from: z.string() }), ({ from }) => ({ ticked: from }));
const capped = defineJob('factory-capped', z.object({}), () => null, { maxAttempts: 3 });
const everySecond = definePeriodicJob({
  name: 'factory-every-second',
  cron: '* * * * * *',
  type: 'factory-tick',
  payload: { from: 'cron' },
});

const worker = createSkiplock({ jobs: [greet, tick, capped], schedules: [everySecond], fastPath: false });

/** A typed client whose fetch is the Worker's own, inside workerd. */
function clientOf(skiplock: Skiplock, bindings: object = env) {
  return createClient('http://skiplock.test', {
    apiKey: env.ADMIN_TOKEN,
    fetch: async (input, init) => {
      const ctx = createExecutionContext();
      const response = await skiplock.fetch(new Request(input, init), bindings as typeof env, ctx);
      await waitOnExecutionContext(ctx);
      return response;
    },
  });
}

async function runCron(skiplock: Skiplock, bindings: object = env): Promise<void> {
  await skiplock.scheduled(createScheduledController({ cron: '* * * * *' }), bindings as typeof env);
}

describe('createSkiplock in workerd', () => {
  it("enqueues the user's job over HTTP, drains it in scheduled(), and the client reads its typed result", async () => {
    const client = clientOf(worker);

    const job = await client.enqueue(greet, { name: 'Ada' }, { tenant: `factory-${crypto.randomUUID()}` });
    await runCron(worker);

    const result = await job.result({ timeoutMs: 10_000 });
    const greeting: string = result.greeting;
    expect(greeting).toBe('hello Ada');
  });

  it("wake() after an enqueue in the user's own code runs the job at once, and tells the queue clock", async () => {
    const withFastPath = createSkiplock({ jobs: [greet, tick], schedules: [everySecond] });
    const clock = new QueueClock(env.SKIPLOCK_CLOCK!);
    const tickNow = () => ({ now: Date.now(), definitions: 'wake-test', recheckMs: 3_600_000, holdMs: 1000 });
    await clock.settle(Date.now() + 3_600_000, (await clock.begin(tickNow())).epoch);
    expect((await clock.begin(tickNow())).drain).toBe(false);
    const handle = await enqueue(
      neonHttpDb(env.DATABASE_URL!),
      greet,
      { name: 'Grace' },
      { tenant: `factory-${crypto.randomUUID()}` },
    );
    const ctx = createExecutionContext();

    withFastPath.wake(env, ctx);
    await waitOnExecutionContext(ctx);

    expect(await handle.status()).toMatchObject({ status: 'succeeded', result: { greeting: 'hello Grace' } });
    expect((await clock.begin(tickNow())).drain).toBe(true);
  });

  it("refuses with 422, naming the field, a payload that fails a known type's schema, and stores nothing", async () => {
    const client = clientOf(worker);
    const queue = `factory-${crypto.randomUUID()}`;

    // @ts-expect-error -- name must be a string: this must not compile.
    const refused = client.enqueue<typeof greet>('factory-greet', { name: 42 }, { queue });
    await expect(refused).rejects.toBeInstanceOf(SkiplockApiError);
    await expect(refused).rejects.toMatchObject({
      status: 422,
      problem: { type: expect.stringMatching(/invalid-payload$/), errors: [{ path: 'payload.name' }] },
    });
    const listed = await worker.fetch(
      new Request(`http://skiplock.test/v1/jobs?queue=${queue}`, {
        headers: { authorization: `Bearer ${env.ADMIN_TOKEN}` },
      }),
      env,
      createExecutionContext(),
    );
    expect((await listed.json<{ jobs: unknown[] }>()).jobs).toEqual([]);
  });

  it("stores a job enqueued over HTTP with its type's maxAttempts, or its own when lower", async () => {
    const client = clientOf(worker);
    const queue = `factory-${crypto.randomUUID()}`;

    expect((await (await client.enqueue(capped, {}, { queue })).status()).maxAttempts).toBe(3);
    expect((await (await client.enqueue(capped, {}, { queue, maxAttempts: 10 })).status()).maxAttempts).toBe(3);
    expect((await (await client.enqueue(capped, {}, { queue, maxAttempts: 2 })).status()).maxAttempts).toBe(2);
  });

  it('enqueues its periodic jobs in the cron drain and runs them', async () => {
    const succeeded = async () => {
      const response = await worker.fetch(
        new Request('http://skiplock.test/v1/jobs?queue=factory-tick&status=succeeded', {
          headers: { authorization: `Bearer ${env.ADMIN_TOKEN}` },
        }),
        env,
        createExecutionContext(),
      );
      return (await response.json<{ jobs: Array<{ result: unknown }> }>()).jobs;
    };
    // A tick's job is due at its second: the cron drains after it run it.
    const jobs = await waitFor(
      'a cron drain to run a periodic job it enqueued',
      async () => {
        await runCron(worker);
        const found = await succeeded();
        return found.length > 0 && found;
      },
      { everyMs: 200 },
    );
    expect(jobs.length).toBeGreaterThanOrEqual(1);
    expect(jobs[0]!.result).toEqual({ ticked: 'cron' });
  });

  it("mounts under a path of the user's own Hono app", async () => {
    const app = new Hono()
      .route('/queue', worker.app)
      .get('/', (c) => c.text('my app'))
      .get('/queue/mine', (c) => c.text('mine too'));

    const health = await app.fetch(new Request('http://skiplock.test/queue/healthz'), env, createExecutionContext());
    const own = await app.fetch(new Request('http://skiplock.test/'), env, createExecutionContext());

    const enqueued = await app.fetch(
      new Request('http://skiplock.test/queue/v1/queues/factory-greet/jobs', {
        method: 'POST',
        headers: { authorization: `Bearer ${env.ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ payload: { name: 'mounted' } }),
      }),
      env,
      createExecutionContext(),
    );
    const { statusUrl } = await enqueued.json<{ statusUrl: string }>();
    const status = await app.fetch(new Request(statusUrl), env, createExecutionContext());
    const openapi = await app.fetch(
      new Request('http://skiplock.test/queue/v1/openapi.json'),
      env,
      createExecutionContext(),
    );

    // A path skiplock has no route for goes on to the host's own routes, then to its not-found answer.
    const mine = await app.fetch(new Request('http://skiplock.test/queue/mine'), env, createExecutionContext());
    const nowhere = await app.fetch(new Request('http://skiplock.test/queue/nowhere'), env, createExecutionContext());

    expect(health.status).toBe(200);
    expect(await own.text()).toBe('my app');
    expect(await mine.text()).toBe('mine too');
    expect([nowhere.status, await nowhere.text()]).toEqual([404, '404 Not Found']);
    // The status URL keeps the mount path, so a browser can open it without a key.
    expect(new URL(statusUrl).pathname).toMatch(/^\/queue\/v1\/jobs\//);
    expect(status.status).toBe(200);
    // So does the server the OpenAPI document names, which generated clients call.
    expect((await openapi.json<{ servers: unknown }>()).servers).toEqual([{ url: 'http://skiplock.test/queue' }]);
  });

  it('reaches a Postgres through a Hyperdrive binding with node-postgres, for requests and drains', async () => {
    const { DATABASE_URL: _neon, ...rest } = env;
    const overHyperdrive = { ...rest, HYPERDRIVE: env.TEST_HYPERDRIVE };
    const client = clientOf(worker, overHyperdrive);

    const job = await client.enqueue(greet, { name: 'Grace' });
    await runCron(worker, overHyperdrive);

    expect(await job.result({ timeoutMs: 10_000 })).toEqual({ greeting: 'hello Grace' });
  });

  it('refuses to start with job definitions that cannot work, naming what to fix', () => {
    expect(() => createSkiplock({ jobs: [greet, greet] })).toThrow(/job type "factory-greet" is defined twice/);
    expect(() =>
      createSkiplock({
        jobs: [greet],
        schedules: [definePeriodicJob({ name: 'n', cron: '* * * * *', type: 'nobody' })],
      }),
    ).toThrow(/periodic job "n" names job type "nobody", which no job definition has/);
    expect(() => createSkiplock({ jobs: [defineJob('http', z.unknown(), () => null)] })).toThrow(/built in/);
  });

  it('logs one line and answers 503 when the database or a setting is missing, and the drain refuses too', async () => {
    const log = vi.spyOn(console, 'error').mockImplementation(() => {});
    const { DATABASE_URL: _missing, ...withoutDatabase } = env;
    const fresh = createSkiplock({ jobs: [greet] });

    const response = await fresh.fetch(
      new Request('http://skiplock.test/healthz'),
      withoutDatabase as typeof env,
      createExecutionContext(),
    );
    await expect(runCron(fresh, withoutDatabase)).rejects.toThrow(/^skiplock: no database: set DATABASE_URL/);
    const badNumber = await fresh.fetch(
      new Request('http://skiplock.test/healthz'),
      { ...env, DRAIN_CONCURRENCY: 'lots' },
      createExecutionContext(),
    );

    expect(response.status).toBe(503);
    expect(badNumber.status).toBe(503);
    expect(log.mock.calls.map((call) => String(call[0]))).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^skiplock: no database: set DATABASE_URL/),
        'skiplock: DRAIN_CONCURRENCY must be a whole number from 1 to 50, not "lots"',
      ]),
    );
    log.mockRestore();
  });

  it('refuses, in one line, an ADMIN_TOKEN or STATUS_TOKEN_SECRET under 32 characters outside dev, and a bad HTTP_ALLOWED_HOSTS entry', async () => {
    const log = vi.spyOn(console, 'error').mockImplementation(() => {});
    const answer = (overrides: Partial<typeof env>) =>
      createSkiplock({ jobs: [greet] }).fetch(
        new Request('http://skiplock.test/healthz'),
        { ...env, SKIPLOCK_DEV: undefined, ...overrides },
        createExecutionContext(),
      );

    const shortAdmin = await answer({ ADMIN_TOKEN: 'x'.repeat(31) });
    const shortSecret = await answer({ STATUS_TOKEN_SECRET: 'short' });
    const badHost = await answer({ HTTP_ALLOWED_HOSTS: 'hooks.example.com:http' });
    const inDev = await answer({ ADMIN_TOKEN: 'dev', STATUS_TOKEN_SECRET: 'dev', SKIPLOCK_DEV: '1' });
    const longEnough = await answer({ ADMIN_TOKEN: 'x'.repeat(32), STATUS_TOKEN_SECRET: 'y'.repeat(32) });

    expect([shortAdmin.status, shortSecret.status, badHost.status]).toEqual([503, 503, 503]);
    expect([inDev.status, longEnough.status]).toEqual([200, 200]);
    expect(log.mock.calls.map((call) => String(call[0]))).toEqual([
      'skiplock: ADMIN_TOKEN is 31 characters: outside dev it must be at least 32 (a random one: `openssl rand -base64 32`)',
      'skiplock: STATUS_TOKEN_SECRET is 5 characters: outside dev it must be at least 32 (a random one: `openssl rand -base64 32`)',
      'skiplock: HTTP_ALLOWED_HOSTS must be [tenant=]host[:port] entries, comma-separated, not "hooks.example.com:http"',
    ]);
    log.mockRestore();
  });

  it('refuses, in one line, a SUBREQUEST_LIMIT, WORKERS_PLAN, IDLE_RECHECK_SECONDS or LOG_LEVEL it cannot read', async () => {
    const log = vi.spyOn(console, 'error').mockImplementation(() => {});
    const answer = (overrides: Partial<typeof env>) =>
      createSkiplock({ jobs: [greet] }).fetch(
        new Request('http://skiplock.test/healthz'),
        { ...env, SKIPLOCK_DEV: undefined, ...overrides },
        createExecutionContext(),
      );

    const statuses = [
      (await answer({ SUBREQUEST_LIMIT: '-5' })).status,
      (await answer({ WORKERS_PLAN: 'business' })).status,
      (await answer({ IDLE_RECHECK_SECONDS: 'hourly' })).status,
      (await answer({ LOG_LEVEL: 'chatty' })).status,
      (
        await answer({
          WORKERS_PLAN: 'paid',
          SUBREQUEST_LIMIT: '10000',
          IDLE_RECHECK_SECONDS: '600',
          LOG_LEVEL: 'info',
        })
      ).status,
    ];

    expect(statuses).toEqual([503, 503, 503, 503, 200]);
    expect(log.mock.calls.map((call) => String(call[0]))).toEqual([
      'skiplock: SUBREQUEST_LIMIT must be a whole number from 1, not "-5"',
      'skiplock: WORKERS_PLAN must be free or paid, not "business"',
      'skiplock: IDLE_RECHECK_SECONDS must be a whole number from 1 to 86400, not "hourly"',
      'skiplock: LOG_LEVEL must be warn or info, not "chatty"',
    ]);
    log.mockRestore();
  });
});
