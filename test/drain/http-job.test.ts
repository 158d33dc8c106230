import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { destinationProblem, parseAllowedHosts } from '../../src/drain/handlers/http-destination';
import { readSettings } from '../../src/drain/setting';
import { SHARED_SETTINGS } from '../../src/drain/settings';
import { httpJob, type HttpJobPayload, type HttpJobSettings } from '../../src/drain/handlers/http';
import { httpEndpointSecret } from '../../src/drain/handlers/http-signature';
import { enqueue } from '../../src/engine';
import { publicAddressFetch, type ResolveName } from '../../src/node-worker/public-address-fetch';
import { engineDatabases } from '../support/engine-db';
import { drain, eventKinds, jobById } from './support/drain';
import { startReceiver, type Received } from './support/receiver';

const open = engineDatabases();
const SECRET = 'test-signing-secret';

/** A receiver on 127.0.0.1 whose answer depends on the path: /status/<code>, and a Retry-After on /later. */
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let port: number;
let base: string;
let received: Received[];

beforeAll(async () => {
  receiver = await startReceiver(({ path }) => ({
    status: Number(/^\/status\/(\d{3})/.exec(path)?.[1] ?? 200),
    headers: path.endsWith('/later') ? { 'retry-after': '7' } : ({} as Record<string, string>),
  }));
  ({ port, base, received } = receiver);
});

afterAll(() => receiver.close());
afterEach(() => vi.useRealTimers());

/** The receiver is on loopback: only an entry naming that address and its port lets it in. */
const localOnly = (): HttpJobSettings => ({ allowedHosts: [`127.0.0.1:${port}`], signingSecret: SECRET });

/** Delivers one job in one drain; returns the job and the kinds of its events. */
async function deliverAndRead(payload: HttpJobPayload, settings: HttpJobSettings = localOnly(), tenant = 'default') {
  const { db } = await open('pg');
  // A long backoff, so a retry waits (status retrying) instead of running again within the drain.
  const { job } = await enqueue(db, {
    queue: 'webhooks',
    type: 'http',
    tenant,
    payload: payload as never,
    maxAttempts: 3,
    backoffBaseSeconds: 600,
  });
  await drain(db, [httpJob(settings)]);
  return { job: await jobById(db, job.id), events: await eventKinds(db, job.id) };
}

async function deliver(...args: Parameters<typeof deliverAndRead>) {
  return (await deliverAndRead(...args)).job;
}

/** What the receiver got at this path, the last time. */
function receivedAt(path: string): Received {
  const request = received.findLast((r) => r.path === path);
  if (request === undefined) throw new Error(`nothing was delivered to ${path}`);
  return request;
}

/** Verifies a received request as a receiver would, with the Standard Webhooks reference verifier. */
async function verifies(
  request: Received,
  endpoint: { tenant: string; url: string },
  body = request.body,
): Promise<boolean> {
  const webhook = new Webhook(await httpEndpointSecret(SECRET, endpoint));
  try {
    webhook.verify(body, request.headers as Record<string, string>);
    return true;
  } catch {
    return false;
  }
}

describe('the http job', () => {
  it('delivers a Standard Webhooks signed request that the reference verifier accepts only at its endpoint, for its tenant', async () => {
    const url = `${base}/status/201`;
    const job = await deliver({ url, body: { event: 'signup', user: 7 }, headers: { 'x-tenant': 'acme' } });

    expect(job).toMatchObject({ status: 'succeeded', result: { status: 201, body: 'answer 201' } });
    const request = receivedAt('/status/201');
    expect(request.method).toBe('POST');
    // The payload went through jsonb, which orders keys its own way; a string body is sent byte for byte.
    expect(JSON.parse(request.body)).toEqual({ event: 'signup', user: 7 });
    expect(request.headers).toMatchObject({
      'content-type': 'application/json',
      'x-tenant': 'acme',
      'skiplock-job-id': job.id,
      'skiplock-tenant': 'default',
      'skiplock-attempt': '1',
      'webhook-id': job.id,
      'webhook-timestamp': expect.stringMatching(/^\d+$/),
      'webhook-signature': expect.stringMatching(/^v1,[A-Za-z0-9+/]{43}=$/),
    });
    expect(await httpEndpointSecret(SECRET, { tenant: 'default', url })).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(await verifies(request, { tenant: 'default', url })).toBe(true);
    // The query string is not part of the endpoint.
    expect(await verifies(request, { tenant: 'default', url: `${url}?again=1` })).toBe(true);
    // Tampered, replayed to another URL or for another tenant: the reference verifier refuses.
    expect(await verifies(request, { tenant: 'default', url }, `${request.body} `)).toBe(false);
    expect(await verifies(request, { tenant: 'default', url: `${base}/status/202` })).toBe(false);
    expect(await verifies(request, { tenant: 'default', url: `http://127.0.0.2:${port}/status/201` })).toBe(false);
    expect(await verifies(request, { tenant: 'acme', url })).toBe(false);
    // Replayed after the verifier's five minutes.
    vi.useFakeTimers({ now: Date.now() + 6 * 60_000, toFake: ['Date'] });
    expect(await verifies(request, { tenant: 'default', url })).toBe(false);
  });

  it('does not pass on signature headers that a payload brings', async () => {
    const forged = { 'webhook-id': 'forged', 'webhook-signature': 'v1,forged', 'webhook-timestamp': '1' };
    await deliver({ url: `${base}/status/200?forged`, headers: forged }, { allowedHosts: [`127.0.0.1:${port}`] });

    const request = receivedAt('/status/200?forged');
    expect(request.headers['webhook-id']).toBeUndefined();
    expect(request.headers['webhook-signature']).toBeUndefined();
  });

  it('fails a payload that sets framing or hop-by-hop headers for good, naming them, and sends nothing', async () => {
    const before = received.length;
    const headers = {
      Host: 'internal.example',
      'content-length': '2',
      'Transfer-Encoding': 'chunked',
      'proxy-authorization': 'x',
    };

    const job = await deliver({ url: `${base}/status/200?framing`, headers, body: { a: 1 } });

    expect(job).toMatchObject({ status: 'failed', attempts: 1, lastError: { name: 'InvalidPayloadError' } });
    const { message } = job.lastError as { message: string };
    for (const name of Object.keys(headers)) expect(message).toContain(`headers.${name}`);
    expect(received.length).toBe(before);
  });

  it('fails for good on a 4xx other than 408 and 429', async () => {
    expect(await deliver({ url: `${base}/status/410` })).toMatchObject({
      status: 'failed',
      attempts: 1,
      lastError: { name: 'PermanentError', message: `${base} answered 410: answer 410` },
    });
  });

  it.each([500, 408, 429])('retries on %i', async (status) => {
    const { job, events } = await deliverAndRead({ url: `${base}/status/${status}` });
    expect(job).toMatchObject({
      status: 'retrying',
      lastError: { message: `${base} answered ${status}: answer ${status}` },
    });
    // Full jitter can draw a retry due at once, which the same drain then runs: the first attempt is what counts.
    expect(events.slice(0, 3)).toEqual(['enqueued', 'claimed', 'failed']);
  });

  it('retries a 429 or 503 after its Retry-After', async () => {
    for (const status of [429, 503]) {
      const job = await deliver({ url: `${base}/status/${status}/later` });
      expect(job).toMatchObject({ status: 'retrying', lastError: { name: 'RetryAfterError', retryInSeconds: 7 } });
      expect(Date.parse(job.runAt) - Date.parse(job.finishedAt ?? job.startedAt!)).toBeGreaterThan(6000);
    }
  });

  it("refuses, and sends nothing to, a private address not named, a port not named, or another tenant's entry", async () => {
    const before = received.length;
    const notNamed = await deliver({ url: `${base}/status/200` }, { allowedHosts: ['hooks.example.com'] });
    const otherPort = await deliver({ url: `${base}/status/200` }, { allowedHosts: ['127.0.0.1'] });
    const otherTenant = await deliver(
      { url: `${base}/status/200` },
      { allowedHosts: [`acme=127.0.0.1:${port}`] },
      'globex',
    );
    const ownTenant = await deliver(
      { url: `${base}/status/200?acme` },
      { allowedHosts: [`acme=127.0.0.1:${port}`] },
      'acme',
    );

    for (const job of [notNamed, otherPort, otherTenant]) {
      expect(job).toMatchObject({ status: 'failed', attempts: 1, lastError: { name: 'PermanentError' } });
    }
    expect((notNamed.lastError as { message: string }).message).toMatch(/not a public address/);
    expect((otherPort.lastError as { message: string }).message).toMatch(
      new RegExp(`port ${port} of 127.0.0.1 is not allowed`),
    );
    expect((otherTenant.lastError as { message: string }).message).toMatch(/not a public address/);
    expect(ownTenant).toMatchObject({ status: 'succeeded' });
    expect(received.slice(before).map((request) => request.path)).toEqual(['/status/200?acme']);
  });

  it('fails a payload without a usable URL for good', async () => {
    const job = await deliver({ url: 'ftp://files.example.com/x' });
    expect(job).toMatchObject({ status: 'failed', attempts: 1, lastError: { name: 'InvalidPayloadError' } });
  });
});

describe("the Node worker's delivery (publicAddressFetch)", () => {
  /** A resolver that answers `hooks.example.test` with these addresses and counts its calls. */
  function resolverOf(...addresses: string[]): ResolveName & { calls: number } {
    const resolve = Object.assign(
      async (hostname: string) => {
        resolve.calls += 1;
        if (hostname !== 'hooks.example.test')
          throw Object.assign(new Error(`ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
        return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
      },
      { calls: 0 },
    );
    return resolve;
  }
  const allowed = () => [`hooks.example.test:${port}`];

  it.each([
    ['loopback', ['127.0.0.1']],
    ['cloud metadata (link-local)', ['169.254.169.254']],
    ['private, beside a public one', ['93.184.215.14', '10.0.0.7']],
    ['IPv4-mapped loopback', ['::ffff:127.0.0.1']],
    ['NAT64', ['64:ff9b::7f00:1']],
  ])('refuses a name that resolves to a %s address, for good, and connects to nothing', async (_, addresses) => {
    const before = received.length;
    const resolve = resolverOf(...addresses);
    const job = await deliver(
      { url: `http://hooks.example.test:${port}/status/200` },
      { allowedHosts: allowed(), fetch: publicAddressFetch({ resolve }) },
    );

    expect(job).toMatchObject({ status: 'failed', attempts: 1, lastError: { name: 'PermanentError' } });
    expect((job.lastError as { message: string }).message).toMatch(
      /^hooks\.example\.test resolves to .*, which is not a public address$/,
    );
    expect(received.length).toBe(before);
  });

  it('connects to the very address it checked, resolving the name once per delivery, with the name as Host', async () => {
    // A rebinding resolver: the first answer is the receiver (allowed in this test), any later one elsewhere.
    const answers = ['127.0.0.1', '127.0.0.2'];
    let calls = 0;
    const resolve: ResolveName = async () => [{ address: answers[Math.min(calls++, 1)]!, family: 4 }];
    const fetch = publicAddressFetch({ resolve, allowAddress: (address) => address === '127.0.0.1' });

    const job = await deliver(
      { url: `http://hooks.example.test:${port}/status/200?checked` },
      { allowedHosts: allowed(), fetch },
    );

    expect(job).toMatchObject({ status: 'succeeded', result: { status: 200 } });
    expect(calls).toBe(1);
    expect(receivedAt('/status/200?checked').headers.host).toBe(`hooks.example.test:${port}`);
  });

  it('never sends framing headers it is given: no second request smuggled by a short Content-Length, no other Host', async () => {
    const fetch = publicAddressFetch({ resolve: resolverOf('127.0.0.1'), allowAddress: () => true });
    const body = `{}GET /smuggled HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`;
    const headers = new Headers({
      'content-length': '2',
      host: 'internal.example',
      connection: 'keep-alive',
      'x-kept': 'yes',
    });

    const response = await fetch(new URL(`http://hooks.example.test:${port}/status/200?framed`), {
      method: 'POST',
      headers,
      body,
      signal: AbortSignal.timeout(5000),
    });
    await response.text();

    const request = receivedAt('/status/200?framed');
    expect(request.body).toBe(body);
    expect(request.headers).toMatchObject({ host: `hooks.example.test:${port}`, 'x-kept': 'yes' });
    expect(received.filter((r) => r.path === '/smuggled')).toEqual([]);
  });

  it('times out like the platform fetch', async () => {
    const hanging = createServer(() => {});
    await new Promise<void>((resolve) => hanging.listen(0, '127.0.0.1', resolve));
    const hangingPort = (hanging.address() as AddressInfo).port;
    const fetch = publicAddressFetch({ resolve: resolverOf('127.0.0.1'), allowAddress: () => true });
    try {
      const job = await deliver(
        { url: `http://hooks.example.test:${hangingPort}/`, timeoutMs: 200 },
        { allowedHosts: [`hooks.example.test:${hangingPort}`], fetch },
      );
      expect(job).toMatchObject({
        status: 'retrying',
        lastError: { message: `http://hooks.example.test:${hangingPort} did not answer within 200 ms` },
      });
    } finally {
      hanging.closeAllConnections();
      await new Promise<void>((resolve) => hanging.close(() => resolve()));
    }
  });
});

describe('destinationProblem', () => {
  const check = (url: string, allowed: string[], tenant = 'default') =>
    destinationProblem(new URL(url), tenant, parseAllowedHosts(allowed));

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

  it('allows ports 443 and 80 only, unless the entry names the port', () => {
    expect(check('https://api.example.com/x', ['api.example.com'])).toBeUndefined();
    expect(check('http://api.example.com/x', ['api.example.com'])).toBeUndefined();
    expect(check('https://api.example.com:8443/x', ['api.example.com'])).toMatch(
      /port 8443 of api.example.com is not allowed/,
    );
    expect(check('https://api.example.com:8443/x', ['api.example.com:8443'])).toBeUndefined();
    expect(check('https://api.example.com/x', ['api.example.com:8443'])).toMatch(/port 443/);
    expect(check('https://a.hooks.example.com:22/x', ['*.hooks.example.com'])).toMatch(/port 22/);
    expect(check('http://[2606:4700::1111]:8080/', ['[2606:4700::1111]:8080'])).toBeUndefined();
  });

  it("keeps one tenant's entries from another tenant's jobs", () => {
    const allowed = ['shared.example.com', 'acme=hooks.acme.example', 'acme=*.acme.example:8443'];
    expect(check('https://shared.example.com/', allowed, 'globex')).toBeUndefined();
    expect(check('https://hooks.acme.example/', allowed, 'acme')).toBeUndefined();
    expect(check('https://x.acme.example:8443/', allowed, 'acme')).toBeUndefined();
    expect(check('https://hooks.acme.example/', allowed, 'globex')).toMatch(
      /not on HTTP_ALLOWED_HOSTS for tenant globex/,
    );
    expect(check('https://x.acme.example:8443/', allowed, 'globex')).toMatch(/for tenant globex/);
  });

  it('refuses every non-public address form unless an entry names that address, and localhost always', () => {
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
      'http://224.0.0.1/',
      'http://[::1]/',
      'http://[::]/',
      'http://[::7f00:1]/',
      'http://[::ffff:127.0.0.1]/',
      'http://[::ffff:0:7f00:1]/',
      'http://[64:ff9b::7f00:1]/',
      'http://[2002:7f00:1::]/',
      'http://[fec0::1]/',
      'http://[ff02::1]/',
      'http://[fd00::1]/',
      'http://[fe80::1]/',
      'http://[2001:db8::1]/',
    ]) {
      expect(check(url, ['*.0.1', '*.1']), url).toMatch(/not a public address/);
    }
    for (const url of ['http://localhost/', 'http://localhost./', 'http://api.localhost/']) {
      expect(check(url, ['localhost', '*.localhost']), url).toMatch(/never delivered to/);
    }
    expect(check('http://127.0.0.1:8080/', ['127.0.0.1:8080'])).toBeUndefined();
    expect(check('http://[::1]/', ['::1'])).toBeUndefined();
    expect(check('http://8.8.8.8/', ['8.8.8.8'])).toBeUndefined();
  });

  it('refuses an HTTP_ALLOWED_HOSTS entry it cannot read, naming it, in the variable and in code', () => {
    const allowedHosts = (HTTP_ALLOWED_HOSTS: string) =>
      readSettings(SHARED_SETTINGS, { HTTP_ALLOWED_HOSTS }).httpAllowedHosts;
    expect(allowedHosts(' a.example.com , acme=b.example.com:8443,, ')).toEqual([
      'a.example.com',
      'acme=b.example.com:8443',
    ]);
    for (const entry of ['=a.example.com', 'a.example.com:http', 'a.example.com:70000', 'a b.example.com', '[::1']) {
      expect(() => allowedHosts(`ok.example.com,${entry}`), entry).toThrow(
        `HTTP_ALLOWED_HOSTS must be [tenant=]host[:port] entries, comma-separated, not "${entry}"`,
      );
      expect(() => parseAllowedHosts(['ok.example.com', entry]), entry).toThrow(
        `HTTP_ALLOWED_HOSTS: cannot read "${entry}"`,
      );
    }
  });
});
