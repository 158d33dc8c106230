import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { destinationProblem } from '../../src/drain/handlers/http-destination';
import { httpJob, type HttpJobPayload, type HttpJobSettings } from '../../src/drain/handlers/http';
import { SIGNATURE_HEADER, verifySignature } from '../../src/drain/handlers/http-signature';
import { enqueue } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';
import { drain, jobById } from './support/drain';

const open = engineDatabases();
const SECRET = 'test-signing-secret';

interface Received {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A receiver on 127.0.0.1 whose answer depends on the path: /status/<code>. */
let server: Server;
let base: string;
const received: Received[] = [];

beforeAll(async () => {
  server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const path = request.url ?? '/';
      received.push({ method: request.method ?? '', path, headers: request.headers, body: Buffer.concat(chunks).toString() });
      const status = Number(/^\/status\/(\d{3})/.exec(path)?.[1] ?? 200);
      const headers = path.endsWith('/later') ? { 'retry-after': '7' } : {};
      response.writeHead(status, headers).end(`answer ${status}`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const localOnly: HttpJobSettings = { allowedHosts: ['127.0.0.1'], signingSecret: SECRET };

async function deliver(payload: HttpJobPayload, settings: HttpJobSettings = localOnly) {
  const { db } = await open('pg');
  // A long backoff, so a retry waits (status retrying) instead of running again within the drain.
  const { job } = await enqueue(db, {
    queue: 'webhooks',
    type: 'http',
    payload: payload as never,
    maxAttempts: 3,
    backoffBaseSeconds: 600,
  });
  await drain(db, [httpJob(settings)]);
  return jobById(db, job.id);
}

describe('the http job', () => {
  it('delivers a signed request that the receiver can verify, and succeeds on 2xx', async () => {
    const job = await deliver({ url: `${base}/status/201`, body: { event: 'signup', user: 7 }, headers: { 'x-tenant': 'acme' } });

    expect(job).toMatchObject({ status: 'succeeded', result: { status: 201, body: 'answer 201' } });
    const request = received.find((r) => r.path === '/status/201')!;
    expect(request.method).toBe('POST');
    // The payload went through jsonb, which orders keys its own way; a string body is sent byte for byte.
    expect(JSON.parse(request.body)).toEqual({ event: 'signup', user: 7 });
    expect(request.headers).toMatchObject({ 'content-type': 'application/json', 'x-tenant': 'acme', 'skiplock-job-id': job.id, 'skiplock-attempt': '1' });
    const signature = request.headers[SIGNATURE_HEADER] as string;
    expect(signature).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(await verifySignature(signature, request.body, SECRET)).toBe(true);
    expect(await verifySignature(signature, `${request.body} `, SECRET)).toBe(false);
    expect(await verifySignature(signature, request.body, 'another secret')).toBe(false);
  });

  it('fails for good on a 4xx other than 408 and 429', async () => {
    expect(await deliver({ url: `${base}/status/410` })).toMatchObject({
      status: 'failed',
      attempts: 1,
      lastError: { name: 'PermanentFailure', message: `${base} answered 410: answer 410` },
    });
  });

  it.each([500, 408, 429])('retries on %i', async (status) => {
    expect(await deliver({ url: `${base}/status/${status}` })).toMatchObject({
      status: 'retrying',
      attempts: 1,
      lastError: { message: `${base} answered ${status}: answer ${status}` },
    });
  });

  it('retries a 429 or 503 after its Retry-After', async () => {
    for (const status of [429, 503]) {
      const job = await deliver({ url: `${base}/status/${status}/later` });
      expect(job).toMatchObject({ status: 'retrying', lastError: { name: 'RetryAfter', retryInSeconds: 7 } });
      expect(Date.parse(job.runAt) - Date.parse(job.finishedAt ?? job.startedAt!)).toBeGreaterThan(6000);
    }
  });

  it('refuses hosts that are not on the allow-list, and sends nothing', async () => {
    const before = received.length;
    const job = await deliver({ url: `${base}/status/200` }, { allowedHosts: ['hooks.example.com'] });

    expect(job).toMatchObject({ status: 'failed', attempts: 1, lastError: { name: 'PermanentFailure' } });
    expect((job.lastError as { message: string }).message).toMatch(/loopback, private or link-local/);
    expect(received.length).toBe(before);
  });

  it('fails a payload without a usable URL for good', async () => {
    const job = await deliver({ url: 'ftp://files.example.com/x' });
    expect(job).toMatchObject({ status: 'failed', attempts: 1, lastError: { name: 'InvalidPayload' } });
  });
});

describe('destinationProblem', () => {
  const check = (url: string, allowed: string[]) => destinationProblem(new URL(url), allowed);

  it('allows exact hosts and subdomains of a wildcard, and nothing else', () => {
    const allowed = ['api.example.com', '*.hooks.example.com'];
    expect(check('https://api.example.com/x', allowed)).toBeUndefined();
    expect(check('https://API.example.com./x', allowed)).toBeUndefined();
    expect(check('https://a.hooks.example.com/x', allowed)).toBeUndefined();
    expect(check('https://a.b.hooks.example.com/x', allowed)).toBeUndefined();
    expect(check('https://hooks.example.com/x', allowed)).toMatch(/not on HTTP_ALLOWED_HOSTS/);
    expect(check('https://evilhooks.example.com/x', allowed)).toMatch(/not on HTTP_ALLOWED_HOSTS/);
    expect(check('https://example.com/x', allowed)).toMatch(/not on HTTP_ALLOWED_HOSTS/);
    expect(check('https://api.example.com/x', [])).toMatch(/HTTP_ALLOWED_HOSTS is empty/);
  });

  it('refuses loopback, private and link-local addresses unless an exact entry names them', () => {
    for (const url of [
      'http://127.0.0.1/',
      'http://2130706433/',
      'http://0x7f.1/',
      'http://10.1.2.3/',
      'http://172.20.0.1/',
      'http://192.168.1.1/',
      'http://169.254.169.254/latest/meta-data',
      'http://100.64.0.1/',
      'http://0.0.0.0/',
      'http://[::1]/',
      'http://[::ffff:127.0.0.1]/',
      'http://[fd00::1]/',
      'http://[fe80::1]/',
      'http://localhost/',
      'http://localhost./',
      'http://api.localhost/',
    ]) {
      expect(check(url, ['*.localhost', '*.0.1'])).toMatch(/loopback, private or link-local/);
    }
    expect(check('http://127.0.0.1:8080/', ['127.0.0.1'])).toBeUndefined();
    expect(check('http://[::1]/', ['::1'])).toBeUndefined();
    expect(check('http://8.8.8.8/', ['8.8.8.8'])).toBeUndefined();
  });
});
