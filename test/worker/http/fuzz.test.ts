import { env } from 'cloudflare:workers';
import fc from 'fast-check';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { httpDatabase } from '../support/databases';
import { ADMIN_TOKEN, BASE_URL, type EnqueuedJob } from './support/api';
import { createOwnDatabase } from './support/database';
import { fetchWithEnv } from './support/invoke';

/**
 * Random requests to every route: whatever the body, query and headers, the
 * API never answers 5xx, and a refused request (4xx) changes no row. The
 * requests go to a database of this file's own, so a snapshot of its rows
 * sees only what these requests did.
 */

const RUNS = 400;

interface Seed {
  send(path: string, init?: RequestInit<IncomingRequestCfProperties>): Promise<Response>;
  snapshot(): Promise<Record<string, string>>;
  jobIds: string[];
  leaseTokens: string[];
  keyIds: string[];
  bearers: string[];
  statusTokens: string[];
}

let seed: Seed;

beforeAll(async () => {
  const databaseUrl = await createOwnDatabase('fuzz');
  const send = (path: string, init: RequestInit<IncomingRequestCfProperties> = {}) =>
    fetchWithEnv({ DATABASE_URL: databaseUrl }, new URL(path, BASE_URL).href, init);
  const admin = (method: string, path: string, body: unknown) =>
    send(path, {
      method,
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    }).then((response) => response.json<Record<string, unknown>>());

  const jobs = [
    await admin('POST', '/v1/queues/fuzz-q/jobs', { tenant: 'fuzz-a', payload: { n: 1 } }),
    await admin('POST', '/v1/queues/fuzz-q/jobs', { tenant: 'fuzz-b', dedupKey: 'dk' }),
    await admin('POST', '/v1/queues/fuzz-q/jobs', { tenant: 'fuzz-b' }),
    await admin('POST', '/v1/queues/fuzz-q/jobs', { tenant: 'fuzz-a' }),
  ] as unknown as EnqueuedJob[];
  const claimed = (await admin('POST', '/v1/queues/fuzz-q/claim', { workerId: 'fuzz', max: 2 })) as {
    jobs: { leaseToken: string }[];
  };
  await admin('POST', `/v1/jobs/${jobs[3]!.id}/cancel`, {});
  const keys = await Promise.all(
    [
      { scopes: ['read'] },
      { scopes: ['enqueue'] },
      { scopes: ['worker'] },
      { scopes: ['read', 'enqueue', 'worker'], tenant: 'fuzz-a' },
      { scopes: ['read'] },
    ].map((key) => admin('POST', '/v1/keys', { name: 'fuzz', ...key }) as Promise<{ id: string; secret: string }>),
  );
  const revoked = keys.at(-1)!;
  await admin('DELETE', `/v1/keys/${revoked.id}`, {});

  const database = httpDatabase({ ...env, DATABASE_URL: databaseUrl });
  seed = {
    send,
    // Rows as text, hashed per table: any change to any row changes the snapshot.
    snapshot: async () =>
      (
        await database.query<Record<string, string>>({
          text: /* sql */ `
            SELECT (SELECT md5(coalesce(string_agg(j::text, '|' ORDER BY j.id), '')) FROM skiplock.all_jobs j) AS jobs,
                   (SELECT md5(coalesce(string_agg(t::text, '|' ORDER BY t.name), '')) FROM skiplock.tenants t) AS tenants,
                   (SELECT md5(coalesce(string_agg(q::text, '|' ORDER BY q.name), '')) FROM skiplock.queues q) AS queues,
                   (SELECT md5(coalesce(string_agg(k::text, '|' ORDER BY k.id), '')) FROM skiplock.api_keys k) AS keys,
                   (SELECT md5(coalesce(string_agg(d::text, '|' ORDER BY d.job_id), '')) FROM skiplock.dedup_keys d) AS dedup_keys,
                   (SELECT count(*)::text FROM skiplock.job_events) AS events`,
          params: [],
        })
      )[0]!,
    jobIds: jobs.map((job) => job.id),
    leaseTokens: claimed.jobs.map((job) => job.leaseToken),
    keyIds: [revoked.id],
    bearers: [ADMIN_TOKEN, ...keys.map((key) => key.secret)],
    statusTokens: jobs.map((job) => new URL(job.statusUrl!).searchParams.get('token')!),
  };
}, 60_000);

/** Values that break naive code: wrong types, edges of ranges, characters Postgres refuses. */
const junk = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  fc.constantFrom(-1, 0, 1.5, 1001, 2 ** 31, 1e308, -1e308, null, [], {}),
  fc.constantFrom('', 'x'.repeat(300), '\u0000', '\ud800', '0000-01-01T00:00:00Z'),
);

/** Mostly plausible values of a field, sometimes junk: most bodies pass validation and reach the database. */
function field<T>(plausible: fc.Arbitrary<T>): fc.Arbitrary<unknown> {
  return fc.oneof({ weight: 25, arbitrary: plausible }, { weight: 1, arbitrary: junk });
}

const name = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('fuzz-q', 'fuzz-a', 'fuzz-b', 'default') },
  { weight: 1, arbitrary: fc.string({ maxLength: 140 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 8 }) },
);
/** Plausible values are valid ones; `field` mixes in the invalid. */
const seconds = fc.oneof(fc.integer({ min: 0, max: 100_000 }), fc.double({ min: 0, max: 1000, noNaN: true }));
const timestamp = fc
  .oneof(
    {
      weight: 8,
      arbitrary: fc.date({ min: new Date('2000-01-01'), max: new Date('2100-01-01'), noInvalidDate: true }),
    },
    { weight: 1, arbitrary: fc.date({ noInvalidDate: true }) },
  )
  .map((date) => date.toISOString());
const json = fc.oneof(
  { weight: 12, arbitrary: fc.jsonValue({ maxDepth: 4 }) },
  { weight: 1, arbitrary: fc.constant('x'.repeat(300_000)) },
);
const uuidLike = () => fc.oneof(fc.constantFrom(...seed.leaseTokens), fc.uuid(), fc.string({ maxLength: 40 }));

/** One of two exclusive fields, now and then both. */
function eitherOf(first: string, second: string, values: [fc.Arbitrary<unknown>, fc.Arbitrary<unknown>]) {
  return fc.oneof(
    { weight: 4, arbitrary: fc.constant({}) },
    { weight: 3, arbitrary: values[0].map((value) => ({ [first]: value })) },
    { weight: 3, arbitrary: values[1].map((value) => ({ [second]: value })) },
    { weight: 1, arbitrary: fc.tuple(...values).map(([a, b]) => ({ [first]: a, [second]: b })) },
  );
}

const enqueueBody = fc
  .tuple(
    fc.record(
      {
        type: field(name),
        payload: field(json),
        tenant: field(name),
        priority: field(fc.integer({ min: -1000, max: 1000 })),
        maxAttempts: field(fc.integer({ min: 1, max: 1000 })),
        leaseSeconds: field(fc.integer({ min: 1, max: 86_400 })),
        dedupKey: field(fc.oneof(fc.constant('dk'), fc.string({ minLength: 1, maxLength: 20 }))),
        dedupWindowSeconds: field(fc.integer({ min: 0, max: 86_400 })),
        backoffBaseSeconds: field(fc.double({ min: 0.01, max: 100, noNaN: true })),
        backoffMaxSeconds: field(seconds),
      },
      { requiredKeys: [] },
    ),
    eitherOf('runAt', 'delaySeconds', [field(timestamp), field(seconds)]),
    eitherOf('expiresAt', 'ttlSeconds', [field(timestamp), field(seconds)]),
  )
  .map(([fields, start, expiry]) => ({ ...fields, ...start, ...expiry }));

interface RouteShape {
  method: string;
  /** Builds the path from a random segment (queue, tenant or key id) and job id. */
  path(segment: string, id: string): string;
  body?: () => fc.Arbitrary<unknown>;
  query?: Record<string, fc.Arbitrary<string>>;
}

const queryName = fc.oneof(
  name.filter((text) => !/[\ud800-\udfff]/.test(text)),
  fc.constant('fuzz-q'),
);
const ROUTES: RouteShape[] = [
  { method: 'POST', path: (queue) => `/v1/queues/${queue}/jobs`, body: () => enqueueBody },
  {
    method: 'POST',
    path: (queue) => `/v1/queues/${queue}/jobs/batch`,
    body: () => fc.record({ jobs: field(fc.array(enqueueBody, { minLength: 1, maxLength: 3 })) }),
  },
  {
    method: 'GET',
    path: (_, id) => `/v1/jobs/${id}`,
    // Only 0 is a valid wait: a real wait would hold the run for seconds.
    query: { wait: fc.constantFrom('0', '31', '-1', 'x', '', '1e1', '0.0001') },
  },
  { method: 'GET', path: (_, id) => `/v1/jobs/${id}/events` },
  {
    method: 'GET',
    path: () => '/v1/jobs',
    query: {
      queue: queryName,
      tenant: queryName,
      status: fc.constantFrom('queued', 'running', 'done', ''),
      type: queryName,
      cursor: fc.oneof(fc.string({ maxLength: 80 }), fc.constant('c2VxOjE')),
      limit: fc.constantFrom('1', '500', '501', '0', '-1', 'x', '2.5'),
    },
  },
  { method: 'POST', path: (_, id) => `/v1/jobs/${id}/cancel` },
  { method: 'POST', path: (_, id) => `/v1/jobs/${id}/retry` },
  { method: 'GET', path: () => '/v1/queues' },
  { method: 'GET', path: () => '/v1/stats' },
  {
    method: 'PUT',
    path: (tenant) => `/v1/tenants/${tenant}`,
    body: () =>
      fc.record(
        {
          concurrency: field(fc.option(fc.integer({ min: 0, max: 100_000 }))),
          rateLimit: field(
            fc.option(
              fc.record({
                count: field(fc.integer({ min: 0, max: 10 })),
                perSeconds: field(fc.integer({ min: 1, max: 86_400 })),
              }),
            ),
          ),
          weight: field(fc.integer({ min: 1, max: 1000 })),
        },
        { requiredKeys: [] },
      ),
  },
  { method: 'GET', path: (tenant) => `/v1/tenants/${tenant}` },
  {
    method: 'PUT',
    path: (queue) => `/v1/queues/${queue}`,
    body: () =>
      fc.record(
        {
          concurrency: field(fc.option(fc.integer({ min: 0, max: 100_000 }))),
          weight: field(fc.integer({ min: 1, max: 1000 })),
        },
        { requiredKeys: [] },
      ),
  },
  { method: 'GET', path: (queue) => `/v1/queues/${queue}` },
  {
    method: 'POST',
    path: (queue) => `/v1/queues/${queue}/claim`,
    body: () =>
      fc.record(
        {
          max: field(fc.integer({ min: 1, max: 100 })),
          leaseSeconds: field(fc.integer({ min: 1, max: 86_400 })),
          workerId: field(name),
          types: field(fc.array(name, { maxLength: 3 })),
        },
        { requiredKeys: [] },
      ),
  },
  ...(['complete', 'fail', 'extend', 'release'] as const).map(
    (action): RouteShape => ({
      method: 'POST',
      path: (_, id) => `/v1/jobs/${id}/${action}`,
      body: () =>
        fc.record(
          {
            leaseToken: field(uuidLike()),
            result: field(json),
            error: field(json),
            retryInSeconds: field(seconds),
            forGood: field(fc.boolean()),
            leaseSeconds: field(fc.integer({ min: 1, max: 86_400 })),
            progress: field(json),
            delaySeconds: field(seconds),
            countAttempt: field(fc.boolean()),
          },
          { requiredKeys: [] },
        ),
    }),
  ),
  {
    method: 'POST',
    path: () => '/v1/keys',
    body: () =>
      fc.record(
        {
          name: field(name),
          scopes: field(fc.array(fc.constantFrom('admin', 'read', 'enqueue', 'worker', 'root'), { maxLength: 5 })),
          tenant: field(name),
        },
        { requiredKeys: [] },
      ),
  },
  { method: 'GET', path: () => '/v1/keys' },
  { method: 'DELETE', path: (id) => `/v1/keys/${id}` },
];

/** A path segment as a client might send it: encoded, or raw and malformed. */
function pathSegment(values: fc.Arbitrary<string>): fc.Arbitrary<string> {
  return fc.oneof(
    // encodeURIComponent throws on an unpaired surrogate; send the bytes it would be instead.
    {
      weight: 4,
      arbitrary: values.map((value) => (/[\ud800-\udfff]/.test(value) ? '%ED%A0%80' : encodeURIComponent(value))),
    },
    { weight: 1, arbitrary: fc.constantFrom('%', '%zz', '%00', '..', '', 'a%2Fb') },
  );
}

/** A header that most requests leave out. */
function sometimes(value: fc.Arbitrary<string>): fc.Arbitrary<string | undefined> {
  return fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: value });
}

/** A printable header value: what a fetch client can send at all. */
const headerText = fc.stringMatching(/^[\x20-\x7e]{0,60}$/);

function requestOf(route: RouteShape) {
  return fc.record({
    segment: pathSegment(fc.oneof(name, fc.constantFrom(...seed.keyIds))),
    id: pathSegment(
      fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...seed.jobIds) }, fc.uuid(), fc.string({ maxLength: 40 })),
    ),
    query: fc.record(
      { ...route.query, token: fc.oneof(fc.constantFrom(...seed.statusTokens), headerText) },
      { requiredKeys: [] },
    ),
    body: route.body
      ? fc.oneof(
          { weight: 8, arbitrary: route.body().map((value) => JSON.stringify(value)) },
          {
            weight: 1,
            arbitrary: route.body().map((value) => JSON.stringify({ ...(value as object), unknownField: 1 })),
          },
          { weight: 1, arbitrary: fc.string() },
          { weight: 1, arbitrary: fc.constantFrom('', '{', 'null', '[]', '"x"', '1e999', '['.repeat(10_000)) },
        )
      : fc.constant(undefined),
    headers: fc
      .record({
        authorization: fc.oneof(
          { weight: 8, arbitrary: fc.constant(`Bearer ${ADMIN_TOKEN}`) },
          { weight: 8, arbitrary: fc.constantFrom(...seed.bearers).map((bearer) => `Bearer ${bearer}`) },
          {
            weight: 1,
            arbitrary: fc.constantFrom(
              'Bearer ',
              'Bearer junk',
              'Basic YTpi',
              `bearer ${ADMIN_TOKEN}`,
              `Bearer  ${ADMIN_TOKEN}`,
            ),
          },
          { weight: 1, arbitrary: headerText },
          { weight: 2, arbitrary: fc.constant(undefined) },
        ),
        'content-type': fc.oneof(
          { weight: 8, arbitrary: fc.constant('application/json') },
          {
            weight: 1,
            arbitrary: fc.constantFrom(
              'application/json; charset=utf-8',
              'application/problem+json',
              'text/plain',
              'multipart/form-data',
            ),
          },
        ),
        'idempotency-key': sometimes(fc.oneof(fc.constant('request-1'), headerText)),
        'if-none-match': sometimes(fc.oneof(fc.constant('*'), headerText)),
        'last-event-id': sometimes(headerText),
        origin: sometimes(fc.constantFrom('https://app.example.test', 'https://evil.example.test', 'null')),
      })
      .map((headers) =>
        Object.fromEntries(
          Object.entries(headers).filter((entry): entry is [string, string] => entry[1] !== undefined),
        ),
      ),
  });
}

describe('fuzzed requests', () => {
  it('never answer 5xx, and change no row when refused', async () => {
    // A line per request would bury the test output.
    vi.spyOn(console, 'log').mockImplementation(() => {});
    const arbitrary = fc
      .constantFrom(...ROUTES)
      .chain((route) => requestOf(route).map((request) => ({ route, ...request })));

    await fc.assert(
      fc.asyncProperty(arbitrary, async ({ route, segment, id, query, body, headers }) => {
        const path = `${route.path(segment, id)}?${new URLSearchParams(query)}`;
        const before = await seed.snapshot();

        const response = await seed.send(path, { method: route.method, headers, body });
        let text = '';
        if (response.headers.get('content-type')?.startsWith('text/event-stream')) await response.body?.cancel();
        else text = await response.text();

        expect(response.status, `${route.method} ${path}: ${text}`).toBeLessThan(500);
        expect(response.headers.get('x-request-id')).toBeTruthy();
        if (response.status >= 400) {
          expect(response.headers.get('content-type')).toBe('application/problem+json');
          const changed = `${route.method} ${path} answered ${response.status} but changed rows`;
          expect(await seed.snapshot(), changed).toEqual(before);
        }
      }),
      { numRuns: RUNS },
    );
  }, 120_000);
});
