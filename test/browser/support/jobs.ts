import { parseResponse } from 'hono/client';
import type { SkiplockClient } from '../../../src/http/client';

/**
 * Jobs the tests move along themselves, through the pull API: their type has
 * no handler in the Worker, so its drains leave them alone.
 */
export const MANUAL_TYPE = 'manual';

export function enqueueManual(
  api: SkiplockClient,
  queue: string,
  json: {
    tenant?: string;
    payload?: unknown;
    tags?: string[];
    concurrencyKey?: string;
    debounceKey?: string;
    debouncePeriodSeconds?: number;
  } = {},
) {
  return parseResponse(
    api.v1.queues[':queue'].jobs.$post({ param: { queue }, json: { type: MANUAL_TYPE, ...json }, header: {} }),
  );
}

export async function claimNext(api: SkiplockClient, queue: string) {
  const { jobs } = await parseResponse(
    api.v1.queues[':queue'].claim.$post({ param: { queue }, json: { workerId: 'browser-test', types: [MANUAL_TYPE] } }),
  );
  if (jobs[0] === undefined) throw new Error(`nothing to claim in ${queue}`);
  return jobs[0];
}

export function failForGood(api: SkiplockClient, id: string, leaseToken: string, error: unknown) {
  return parseResponse(api.v1.jobs[':id'].fail.$post({ param: { id }, json: { leaseToken, error, forGood: true } }));
}

export function completeJob(api: SkiplockClient, id: string, leaseToken: string, result: unknown) {
  return parseResponse(api.v1.jobs[':id'].complete.$post({ param: { id }, json: { leaseToken, result } }));
}

export function reportProgress(api: SkiplockClient, id: string, leaseToken: string, progress: unknown) {
  return parseResponse(api.v1.jobs[':id'].extend.$post({ param: { id }, json: { leaseToken, progress } }));
}

export function getJob(api: SkiplockClient, id: string) {
  return parseResponse(api.v1.jobs[':id'].$get({ param: { id }, query: {} }));
}

export function queueSummaries(api: SkiplockClient) {
  return parseResponse(api.v1.queues.$get());
}

export function setQueue(
  api: SkiplockClient,
  queue: string,
  json: {
    concurrency: number | null;
    weight: number;
    rateLimit?: { count: number; perSeconds: number; onExcess?: 'throttle' | 'drop' };
  },
) {
  return parseResponse(api.v1.queues[':queue'].$put({ param: { queue }, json }));
}

export function getTenant(api: SkiplockClient, tenant: string) {
  return parseResponse(api.v1.tenants[':tenant'].$get({ param: { tenant } }));
}

/** A new API key's secret; with `tenant`, bound to it. */
export async function createKey(
  api: SkiplockClient,
  scopes: Array<'admin' | 'enqueue' | 'read' | 'worker' | 'operator'>,
  tenant?: string,
): Promise<string> {
  const json = { name: `browser-test-${scopes.join('-')}`, scopes, ...(tenant === undefined ? {} : { tenant }) };
  return (await parseResponse(api.v1.keys.$post({ json }))).secret;
}

export function attemptTimings(api: SkiplockClient, window: '1h' | '24h' | '7d') {
  return parseResponse(api.v1.stats.timings.$get({ query: { window } }));
}

export function dailyAttemptStats(api: SkiplockClient, days: number) {
  return parseResponse(api.v1.stats.daily.$get({ query: { days: String(days) } }));
}
