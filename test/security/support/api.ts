import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { inject } from 'vitest';
import type { ApiKeyScope } from '../../../src/engine/api-keys';

/** The running stack this suite probes (running-stack.ts). */
export const stack = inject('stack');

export interface Call {
  /** An API key; none when left out. */
  key?: string;
  method?: string;
  body?: unknown;
  headers?: Record<string, string>;
}

/** One request to the running Worker. */
export function call(path: string, { key, method, body, headers = {} }: Call = {}): Promise<Response> {
  return fetch(new URL(path, stack.url), {
    method: method ?? (body === undefined ? 'GET' : 'POST'),
    headers: {
      ...(key === undefined ? {} : { authorization: `Bearer ${key}` }),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

/** The body of an answer that must have this status. */
export async function expectJson<T = Record<string, unknown>>(response: Response, status: number): Promise<T> {
  const text = await response.text();
  if (response.status !== status) throw new Error(`expected ${status}, got ${response.status}: ${text}`);
  return JSON.parse(text) as T;
}

export function uniqueName(prefix: string): string {
  return `${prefix}-${crypto.randomUUID()}`;
}

/** A new API key's secret, made with the dev admin key. */
export async function createKey(scopes: ApiKeyScope[], tenant?: string): Promise<string> {
  const created = await call('/v1/keys', {
    key: stack.adminToken,
    body: { name: uniqueName('security'), scopes, tenant },
  });
  return (await expectJson<{ secret: string }>(created, 201)).secret;
}

/** The Worker's variables as npm start wrote them (`.data/worker.env`). */
export async function workerVariables(): Promise<Record<string, string>> {
  const text = await readFile(join(stack.checkout, '.data/worker.env'), 'utf8');
  return Object.fromEntries(
    text
      .trim()
      .split('\n')
      .map(
        (line) =>
          /^(\w+)='(.*)'$/
            .exec(line)!
            .slice(1, 3)
            .map((part) => part.replaceAll('\\$', '$')) as [string, string],
      ),
  );
}
