import { createExecutionContext, waitOnExecutionContext } from 'cloudflare:test';
import { env } from 'cloudflare:workers';
import type { createApp } from '../../../../src/http/app';
import worker from '../../../../src/worker';

/** The Worker's fetch with bindings changed: another database, another secret. */
export async function fetchWithEnv(
  overrides: Partial<Cloudflare.Env>,
  url: string,
  init?: RequestInit<IncomingRequestCfProperties>,
): Promise<Response> {
  const ctx = createExecutionContext();
  const response = await worker.fetch(new Request(url, init), { ...env, ...overrides }, ctx);
  await waitOnExecutionContext(ctx);
  return response;
}

/** An app built with other dependencies than the Worker's, called as the Worker would call it. */
export async function fetchApp(app: ReturnType<typeof createApp>, request: Request): Promise<Response> {
  const ctx = createExecutionContext();
  const response = await app.fetch(request, env, ctx);
  await waitOnExecutionContext(ctx);
  return response;
}
