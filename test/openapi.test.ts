import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createClient as generateClient } from '@hey-api/openapi-ts';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { projectRoot } from './support/repository-root';
import { ADMIN_TOKEN, startTestStack, type TestStack } from './browser/support/stack';

interface Operation {
  operationId?: string;
  tags?: string[];
  security?: Array<Record<string, string[]>>;
}

interface OpenApiDocument {
  openapi: string;
  servers?: Array<{ url: string }>;
  tags?: Array<{ name: string }>;
  paths: Record<string, Record<string, Operation>>;
}

/** What an SDK function of @hey-api/openapi-ts answers (not thrown: `throwOnError` is off by default). */
interface SdkResult {
  data?: Record<string, unknown> & { jobs?: Array<Record<string, unknown>> };
  error?: Record<string, unknown>;
  response: Response;
}
type SdkFunction = (options?: Record<string, unknown>) => Promise<SdkResult>;

const OPERATION_IDS = [
  'acknowledgeJobs',
  'bulkJobs',
  'cancelJob',
  'claimJobs',
  'completeJob',
  'createApiKey',
  'enqueueFlow',
  'enqueueJob',
  'enqueueJobs',
  'extendLease',
  'failJob',
  'getAttemptTimings',
  'getDailyAttemptStats',
  'getHealth',
  'getJob',
  'getJobHistory',
  'getJobSteps',
  'getMetrics',
  'getQueue',
  'getStats',
  'getTenant',
  'getThroughput',
  'handBackJobTypeRetention',
  'listApiKeys',
  'listConcurrencyKeys',
  'listDeadJobs',
  'listJobTypeRetentions',
  'listJobs',
  'listQueues',
  'pauseQueue',
  'releaseJob',
  'releaseWorker',
  'rescheduleJob',
  'resumeQueue',
  'retryJob',
  'revokeApiKey',
  'sendEvent',
  'setJobTypeRetention',
  'setQueue',
  'setTenant',
  'streamJobEvents',
  'unblockConcurrencyKey',
];

/**
 * The document as the Worker serves it under `wrangler dev` (what SDK
 * generators fetch), linted, then turned into a client that calls that Worker.
 */
describe('GET /v1/openapi.json', () => {
  let stack: TestStack;
  let text: string;
  let document: OpenApiDocument;
  beforeAll(async () => {
    stack = await startTestStack();
    text = await (await fetch(`${stack.url}/v1/openapi.json`)).text();
    document = JSON.parse(text) as OpenApiDocument;
  }, 120_000);
  afterAll(async () => {
    await stack?.stop();
  });

  const operations = () =>
    Object.entries(document.paths).flatMap(([path, methods]) =>
      Object.entries(methods).map(([method, operation]) => ({
        route: `${method.toUpperCase()} ${path}`,
        ...operation,
      })),
    );

  it("is clean under Redocly's recommended rules", async () => {
    const config = await createConfig({ extends: ['recommended'] });
    const problems = await lintFromString({ source: text, absoluteRef: `${stack.url}/v1/openapi.json`, config });
    const found = problems.map(
      (problem) => `${problem.severity} ${problem.ruleId} ${problem.location[0]?.pointer}: ${problem.message}`,
    );
    expect(found).toEqual([]);
  });

  it('names and tags every operation, declares its security, and names this deployment as the server', () => {
    expect(document.openapi).toBe('3.1.0');
    expect(document.servers).toEqual([{ url: stack.url }]);
    expect(
      operations()
        .map((operation) => operation.operationId)
        .sort(),
    ).toEqual(OPERATION_IDS);
    const tagNames = document.tags!.map((tag) => tag.name);
    for (const { route, tags, security } of operations()) {
      expect(tags?.length, route).toBe(1);
      expect(tagNames, route).toContain(tags![0]);
      // The liveness probe is open to anyone; a key gets it to say more.
      expect(security, route).toEqual(route === 'GET /healthz' ? [{}, { bearer: [] }] : [{ bearer: [] }]);
    }
  });

  it('generates with @hey-api/openapi-ts into a client that compiles and calls the Worker by operationId', {
    timeout: 60_000,
  }, async () => {
    const output = await mkdtemp(join(tmpdir(), 'skiplock-sdk-'));
    try {
      await generateClient({ input: JSON.parse(text) as Record<string, unknown>, output, logs: { level: 'silent' } });
      await expectCompiles(output);

      const sdk = (await import(join(output, 'sdk.gen.ts'))) as Record<string, SdkFunction>;
      // The generated client's base URL is the document's server; the key goes in as its bearer auth.
      const auth = { auth: ADMIN_TOKEN };
      const call = (operationId: string, options: Record<string, unknown> = {}) =>
        sdk[operationId]!({ ...auth, ...options });

      expect((await sdk.getHealth!()).data).toMatchObject({ status: 'ok' });

      const queue = `sdk-${crypto.randomUUID()}`;
      const enqueued = await call('enqueueJob', { path: { queue }, body: { type: 'sdk-only', payload: { n: 1 } } });
      expect(enqueued.response.status).toBe(201);
      const id = enqueued.data!.id as string;
      expect((await call('getJob', { path: { id } })).data).toMatchObject({ id, status: 'queued', payload: { n: 1 } });
      const listed = await call('listJobs', { query: { queue, status: 'queued' } });
      expect(listed.data!.jobs!.map((job) => job.id)).toEqual([id]);

      const claimed = await call('claimJobs', { path: { queue }, body: { workerId: 'sdk-worker', max: 5 } });
      expect(claimed.data!.jobs).toEqual([
        expect.objectContaining({ id, status: 'running', leaseToken: expect.any(String) }),
      ]);
      const leaseToken = claimed.data!.jobs![0]!.leaseToken;
      const completed = await call('completeJob', { path: { id }, body: { leaseToken, result: { sum: 1 } } });
      expect(completed.data).toMatchObject({ id, status: 'succeeded', result: { sum: 1 } });

      const unknown = await call('getJob', { path: { id: crypto.randomUUID() } });
      expect({ status: unknown.response.status, title: unknown.error?.title }).toEqual({
        status: 404,
        title: 'Not found',
      });
      const anonymous = await sdk.listJobs!({ query: { queue } });
      expect(anonymous.response.status).toBe(401);
    } finally {
      await rm(output, { recursive: true, force: true });
    }
  });
});

/** The generated TypeScript type-checks under strict settings. */
async function expectCompiles(folder: string): Promise<void> {
  await writeFile(
    join(folder, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        noEmit: true,
        target: 'ES2022',
        module: 'ESNext',
        moduleResolution: 'Bundler',
        lib: ['ES2022', 'DOM', 'DOM.Iterable'],
        types: [],
        skipLibCheck: false,
      },
      include: ['**/*.ts'],
    }),
  );
  const tsc = join(projectRoot, 'node_modules/typescript/bin/tsc');
  const run = await promisify(execFile)(process.execPath, [tsc, '-p', folder]).then(
    () => ({ code: 0, output: '' }),
    (error: { code: number; stdout: string }) => ({ code: error.code, output: error.stdout }),
  );
  expect(run).toEqual({ code: 0, output: '' });
}
