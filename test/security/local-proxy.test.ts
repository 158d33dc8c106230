import { stat } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { call, stack, workerVariables } from './support/api';

/**
 * Finding 1: the local Neon proxy opened a superuser session to any web page
 * (a WebSocket with a foreign Origin, SQL over HTTP under a rebound Host),
 * and the embedded Postgres's password was "postgres".
 */
let proxy: { hostPort: string; port: number; secret: string };
let database: URL;

beforeAll(async () => {
  const vars = await workerVariables();
  const [hostPort, secret] = vars.LOCAL_NEON_PROXY!.split('/') as [string, string];
  proxy = { hostPort, port: Number(hostPort.split(':')[1]), secret };
  database = new URL(vars.DATABASE_URL!);
});

const pipe = () => `address=${database.hostname}:${database.port}`;

/** A WebSocket to the proxy: the refusal's status, or 101 when it opened (then closed at once). */
function upgrade(path: string, options: WebSocket.ClientOptions = {}): Promise<number> {
  return new Promise((resolve) => {
    const socket = new WebSocket(`ws://${proxy.hostPort}${path}`, options);
    socket.once('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0));
    socket.once('open', () => {
      socket.terminate();
      resolve(101);
    });
    socket.once('error', () => {});
  });
}

/** SQL over HTTP with the headers a page could set (fetch cannot choose Host; this can). */
function sqlOverHttp(path: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  const body = JSON.stringify({ query: 'SELECT current_user AS who' });
  return new Promise((resolve, reject) => {
    const sent = httpRequest(
      {
        host: '127.0.0.1',
        port: proxy.port,
        path,
        method: 'POST',
        headers: {
          host: proxy.hostPort,
          'content-type': 'text/plain',
          'neon-connection-string': database.href,
          'neon-raw-text-output': 'true',
          ...headers,
        },
      },
      (response) => {
        let text = '';
        response.on('data', (chunk: Buffer) => (text += chunk.toString()));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text }));
      },
    );
    sent.on('error', reject);
    sent.end(body);
  });
}

describe('the local Neon proxy of npm start', () => {
  it('serves the Worker through the real Neon driver (the positive control)', async () => {
    expect((await call('/healthz')).status).toBe(200);
    const answer = await sqlOverHttp(`/${proxy.secret}/sql`, {});
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body)).toMatchObject({ rows: [{ who: 'postgres' }] });
    expect(await upgrade(`/${proxy.secret}/v1?${pipe()}`)).toBe(101);
  });

  it('refuses a WebSocket from a web page (a foreign Origin, or its own), even with the secret', async () => {
    expect(await upgrade(`/${proxy.secret}/v1?${pipe()}`, { origin: 'http://evil.example' })).toBe(403);
    expect(await upgrade(`/${proxy.secret}/v1?${pipe()}`, { origin: `http://${proxy.hostPort}` })).toBe(403);
  });

  it('refuses SQL over HTTP from a web page, and under a rebound Host', async () => {
    expect((await sqlOverHttp(`/${proxy.secret}/sql`, { origin: 'http://evil.example' })).status).toBe(403);
    expect((await sqlOverHttp(`/${proxy.secret}/sql`, { host: `rebind.evil.example:${proxy.port}` })).status).toBe(403);
    expect(
      await upgrade(`/${proxy.secret}/v1?${pipe()}`, { headers: { host: `rebind.evil.example:${proxy.port}` } }),
    ).toBe(403);
  });

  it('answers 404 without the per-run secret, or with a wrong one', async () => {
    const wrong = `${proxy.secret.slice(0, -1)}${proxy.secret.endsWith('A') ? 'B' : 'A'}`;
    expect((await sqlOverHttp('/sql', {})).status).toBe(404);
    expect((await sqlOverHttp(`/${wrong}/sql`, {})).status).toBe(404);
    expect(await upgrade(`/v1?${pipe()}`)).toBe(404);
    expect(await upgrade(`/${wrong}/v1?${pipe()}`)).toBe(404);
  });
});

describe('the embedded Postgres of npm start', () => {
  it('has a random password, kept owner-only in .data/, and refuses the old "postgres"', async () => {
    const password = decodeURIComponent(database.password);
    const old = new URL(database.href);
    old.password = 'postgres';
    const client = new pg.Client({ connectionString: old.href });

    await expect(client.connect()).rejects.toMatchObject({ code: '28P01' });
    expect(password).toMatch(/^[A-Za-z0-9_-]{32}$/);
    for (const file of ['postgres-password', 'admin-token', 'worker.env']) {
      expect((await stat(join(stack.checkout, '.data', file))).mode & 0o777, file).toBe(0o600);
    }
  });
});
