import { lookup } from 'node:dns/promises';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { httpEndpointSecret, httpJob } from '../../src/drain';
import { isPublicAddress } from '../../src/drain/internal';
import { readWorkerConfig, startWorker, type RunningWorker } from '../../src/node-worker';
import { call, expectJson, stack, uniqueName, workerVariables } from './support/api';
import { waitFor } from '../support/wait-for';

/**
 * Finding 4: the `http` job checked only IP literals (a name resolving to
 * 127.0.0.1 or 169.254.169.254 was fetched), missed literal forms, allowed
 * any port and any tenant's receivers, and signed only timestamp and body
 * under one secret, so a captured request replayed to another URL.
 *
 * The Node worker runs here against the stack's database, configured from
 * its variables as `skiplock work` is, with the built-in job under a type of
 * this test's own (the Worker's drains know only `http`, so they leave these
 * jobs to it).
 */
const SIGNING_SECRET = 'security-suite-signing-secret';
const type = uniqueName('sec-http');

interface Received {
  port: number;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}
const received: Received[] = [];
const servers: Server[] = [];
let shared: number;
let acmeOnly: number;
let worker: RunningWorker;

async function receiver(): Promise<number> {
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      received.push({
        port: (server.address() as AddressInfo).port,
        path: request.url ?? '',
        headers: request.headers,
        body,
      });
      response.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  return (server.address() as AddressInfo).port;
}

beforeAll(async () => {
  [shared, acmeOnly] = [await receiver(), await receiver()];
  const config = readWorkerConfig({
    DATABASE_URL: (await workerVariables()).DATABASE_URL,
    HTTP_ALLOWED_HOSTS: `127.0.0.1:${shared}, ${hostname()}:${shared}, *.1, acme=127.0.0.1:${acmeOnly}`,
    HTTP_SIGNING_SECRET: SIGNING_SECRET,
  });
  worker = await startWorker({
    ...config.worker,
    handlers: [{ ...httpJob(config.jobs.http), type }],
    pollIntervalMs: 100,
    housekeepingIntervalMs: 0,
    logger: { info: () => {}, warn: () => {}, error: () => {} },
  });
});

afterAll(async () => {
  await worker?.stop();
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
});

/** Enqueues a delivery over the stack's API and waits for it to end. */
async function deliver(url: string, tenant = 'default', body: unknown = { event: 'paid' }) {
  const queue = uniqueName('sec-http');
  const job = await expectJson<{ id: string }>(
    await call(`/v1/queues/${queue}/jobs`, {
      key: stack.adminToken,
      body: { type, tenant, maxAttempts: 1, payload: { url, body } },
    }),
    201,
  );
  const ended = await waitFor(`the delivery ${job.id} to end`, async () => {
    const now = await expectJson<{ status: string; lastError: { message: string } | null; attempts: number }>(
      await call(`/v1/jobs/${job.id}`, { key: stack.adminToken }),
      200,
    );
    return ['succeeded', 'failed'].includes(now.status) && now;
  });
  return { id: job.id, ...ended };
}

describe('the http job, delivered by the Node worker', () => {
  it('refuses a name that the system resolver points at a non-public address, and connects to nothing', async () => {
    const name = hostname();
    // This machine's own name resolves to a loopback or private address here.
    const { address } = await lookup(name);
    expect(isPublicAddress(address)).toBe(false);
    const before = received.length;

    const job = await deliver(`http://${name}:${shared}/hook`);

    expect(job).toMatchObject({
      status: 'failed',
      lastError: { message: `${name} resolves to ${address}, which is not a public address` },
    });
    expect(received.length).toBe(before);
  });

  it.each([
    ['cloud metadata', 'http://169.254.169.254/latest/meta-data'],
    ['IPv4-compatible loopback', 'http://[::7f00:1]/'],
    ['IPv4-mapped loopback', 'http://[::ffff:0:7f00:1]/'],
    ['NAT64', 'http://[64:ff9b::7f00:1]/'],
    ['6to4', 'http://[2002:7f00:1::]/'],
    ['site-local', 'http://[fec0::1]/'],
    ['multicast', 'http://[ff02::1]/'],
  ])('refuses a %s address literal for good', async (_, url) => {
    const job = await deliver(url);
    expect(job).toMatchObject({ status: 'failed', attempts: 1 });
    expect(job.lastError!.message).toMatch(/not a public address|not on HTTP_ALLOWED_HOSTS/);
  });

  it("refuses a port the entry does not name, and another tenant's entry", async () => {
    const before = received.length;
    const otherPort = await deliver(`http://127.0.0.1:${acmeOnly}/hook`, 'globex');
    const ownTenant = await deliver(`http://127.0.0.1:${acmeOnly}/hook`, 'acme');
    const unnamedPort = await deliver('http://127.0.0.1:8080/hook');

    expect(otherPort).toMatchObject({ status: 'failed' });
    expect(unnamedPort).toMatchObject({
      status: 'failed',
      lastError: { message: expect.stringMatching(/^port 8080 of 127\.0\.0\.1 is not allowed/) },
    });
    expect(ownTenant).toMatchObject({ status: 'succeeded' });
    expect(received.slice(before).map((request) => request.port)).toEqual([acmeOnly]);
  });

  it('signs in the Standard Webhooks format: the reference verifier accepts it at its endpoint only, for its tenant, within its window', async () => {
    const url = `http://127.0.0.1:${shared}/hooks/payments`;
    const job = await deliver(url, 'acme', { event: 'paid', amount: 42 });
    const request = received.findLast((r) => r.headers['webhook-id'] === job.id)!;
    const verifies = async (endpoint: { tenant: string; url: string }, body = request.body) => {
      try {
        new Webhook(await httpEndpointSecret(SIGNING_SECRET, endpoint)).verify(
          body,
          request.headers as Record<string, string>,
        );
        return true;
      } catch {
        return false;
      }
    };

    expect(job).toMatchObject({ status: 'succeeded' });
    expect(request.headers).toMatchObject({ 'webhook-id': job.id, 'skiplock-tenant': 'acme' });
    expect(await verifies({ tenant: 'acme', url })).toBe(true);
    expect(await verifies({ tenant: 'acme', url }, request.body.replace('42', '43'))).toBe(false);
    expect(await verifies({ tenant: 'acme', url: `http://127.0.0.1:${shared}/hooks/refunds` })).toBe(false);
    expect(await verifies({ tenant: 'globex', url })).toBe(false);
    vi.useFakeTimers({ now: Date.now() + 6 * 60_000, toFake: ['Date'] });
    try {
      expect(await verifies({ tenant: 'acme', url })).toBe(false);
    } finally {
      vi.useRealTimers();
    }
  });
});
