import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { describe, expect, it } from 'vitest';
import {
  ADMIN_TOKEN,
  claimOne,
  client,
  createKey,
  enqueueJob,
  expectStatus,
  problemOf,
  request,
  uniqueName,
} from './support/api';

const api = client();

type Families = ReturnType<typeof parsePrometheusTextFormat>;

/** Scrapes /metrics with the key and parses it as Prometheus would. */
async function scrape(apiKey: string): Promise<{ contentType: string | null; text: string; families: Families }> {
  const response = await request('/metrics', { apiKey });
  expect(response.status).toBe(200);
  const text = await response.text();
  return { contentType: response.headers.get('content-type'), text, families: parsePrometheusTextFormat(text) };
}

/** The value of a gauge or counter series with these labels, undefined without one. */
function value(families: Families, name: string, labels: Record<string, string>): number | undefined {
  const family = families.find((f) => f.name === name);
  const series = family?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  return series !== undefined && 'value' in series ? Number(series.value) : undefined;
}

/**
 * One queue and tenant's histogram. The parser folds a histogram family into
 * a single series and drops its labels, so it is given the family's HELP and
 * TYPE and this queue and tenant's lines, their labels taken off.
 */
function histogram(text: string, name: string, { queue, tenant }: { queue: string; tenant: string }) {
  const own = `queue="${queue}",tenant="${tenant}"`;
  const lines = text
    .split('\n')
    .filter((line) => line.startsWith(`# HELP ${name} `) || line.startsWith(`# TYPE ${name} `) || line.includes(own))
    .filter((line) => line.startsWith('#') || line.startsWith(name))
    .map((line) => line.replace(`{${own},`, '{').replace(`{${own}}`, ''));
  const [family] = parsePrometheusTextFormat(`${lines.join('\n')}\n`);
  const series = family?.metrics[0];
  if (family?.type !== 'HISTOGRAM' || series === undefined || !('buckets' in series)) {
    throw new Error(`no histogram ${name} for ${own}`);
  }
  return { buckets: series.buckets, count: Number(series.count), sum: Number(series.sum) };
}

async function fail(job: { id: string; leaseToken: string }, json: { retryInSeconds?: number; forGood?: boolean }) {
  const response = await api.v1.jobs[':id'].fail.$post({
    param: { id: job.id },
    json: { leaseToken: job.leaseToken, error: 'planned', ...json },
  });
  expectStatus(response, 200);
}

describe('GET /metrics', () => {
  it('reports jobs by state, the oldest wait, attempts and their times, per queue and tenant, as Prometheus parses them', async () => {
    const queue = uniqueName('metrics');
    const tenant = uniqueName('metrics-tenant');
    for (let n = 0; n < 5; n++) await enqueueJob(queue, { tenant });
    await enqueueJob(queue, { tenant, delaySeconds: 3600 });
    const [done, failed, retried, running] = [
      await claimOne(queue),
      await claimOne(queue),
      await claimOne(queue),
      await claimOne(queue),
    ];
    const completed = await api.v1.jobs[':id'].complete.$post({
      param: { id: done!.id },
      json: { leaseToken: done!.leaseToken },
    });
    expectStatus(completed, 200);
    await fail(failed!, { forGood: true });
    await fail(retried!, { retryInSeconds: 3600 });
    expect(running).toBeDefined();
    // A queue delivered to a Cloudflare queue, with a job nothing here drains.
    const delivered = uniqueName('metrics-delivered');
    const target = { target: 'cloudflare-queue' as const, binding: 'DELIVERY_QUEUE_TEST' };
    expectStatus(await api.v1.queues[':queue'].$put({ param: { queue: delivered }, json: { delivery: target } }), 200);
    await enqueueJob(delivered, { tenant, payload: { run: false } });

    const { contentType, text, families } = await scrape(ADMIN_TOKEN);
    const labels = { queue, tenant };

    expect(contentType).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(families.map((f) => [f.name, f.type])).toEqual([
      ['skiplock_jobs_waiting', 'GAUGE'],
      ['skiplock_jobs_running', 'GAUGE'],
      ['skiplock_jobs_parked', 'GAUGE'],
      ['skiplock_jobs_held', 'GAUGE'],
      ['skiplock_oldest_waiting_seconds', 'GAUGE'],
      ['skiplock_attempts_started_total', 'COUNTER'],
      ['skiplock_attempts_total', 'COUNTER'],
      ['skiplock_jobs_expired_total', 'COUNTER'],
      ['skiplock_attempt_wait_seconds', 'HISTOGRAM'],
      ['skiplock_attempt_run_seconds', 'HISTOGRAM'],
      // The deployment's: queues delivered to a target (other tests make some), and the statistics' rollup.
      ['skiplock_queue_delivery_info', 'GAUGE'],
      ['skiplock_stats_rolled_through_timestamp_seconds', 'GAUGE'],
    ]);
    // One ready, one delayed, one retrying in an hour.
    expect(value(families, 'skiplock_jobs_waiting', labels)).toBe(3);
    expect(value(families, 'skiplock_jobs_running', labels)).toBe(1);
    expect(value(families, 'skiplock_jobs_parked', labels)).toBe(0);
    expect(value(families, 'skiplock_jobs_held', labels)).toBe(0);
    expect(value(families, 'skiplock_oldest_waiting_seconds', labels)).toBeGreaterThan(0);
    expect(value(families, 'skiplock_oldest_waiting_seconds', labels)).toBeLessThan(120);
    expect(value(families, 'skiplock_attempts_started_total', labels)).toBe(4);
    expect(value(families, 'skiplock_attempts_total', { ...labels, outcome: 'succeeded' })).toBe(1);
    expect(value(families, 'skiplock_attempts_total', { ...labels, outcome: 'retried' })).toBe(1);
    expect(value(families, 'skiplock_attempts_total', { ...labels, outcome: 'failed' })).toBe(1);
    expect(value(families, 'skiplock_attempts_total', { ...labels, outcome: 'cancelled' })).toBe(0);
    expect(value(families, 'skiplock_attempts_total', { ...labels, outcome: 'lease_expired' })).toBe(0);
    expect(value(families, 'skiplock_jobs_expired_total', labels)).toBe(0);
    expect(
      value(families, 'skiplock_queue_delivery_info', { queue: delivered, tenant, target: 'cloudflare-queue' }),
    ).toBe(1);
    expect(value(families, 'skiplock_queue_delivery_info', labels)).toBeUndefined();
    const rolledThrough = value(families, 'skiplock_stats_rolled_through_timestamp_seconds', {})!;
    expect(rolledThrough * 1000).toBeLessThanOrEqual(Date.now());
    for (const name of ['skiplock_attempt_wait_seconds', 'skiplock_attempt_run_seconds']) {
      const { buckets, count, sum } = histogram(text, name, labels);
      const counts = Object.values(buckets).map(Number);
      expect(count).toBe(3);
      expect(buckets['+Inf']).toBe('3');
      expect(counts).toEqual([...counts].sort((a, b) => a - b));
      expect(sum).toBeGreaterThanOrEqual(0);
      expect(sum).toBeLessThan(3 * 120);
    }
  });

  it("shows a tenant-bound operator key its own tenant's series only", async () => {
    const queue = uniqueName('metrics-tenants');
    const [mine, theirs] = [uniqueName('mine'), uniqueName('theirs')];
    await enqueueJob(queue, { tenant: mine });
    await enqueueJob(queue, { tenant: theirs });
    await enqueueJob(queue, { tenant: theirs });

    const bound = await scrape(await createKey(['operator'], mine));
    const operator = await scrape(await createKey(['operator']));

    const tenants = new Set([...bound.text.matchAll(/tenant="([^"]*)"/g)].map((match) => match[1]));
    expect([...tenants]).toEqual([mine]);
    expect(value(bound.families, 'skiplock_jobs_waiting', { queue, tenant: mine })).toBe(1);
    expect(value(operator.families, 'skiplock_jobs_waiting', { queue, tenant: mine })).toBe(1);
    expect(value(operator.families, 'skiplock_jobs_waiting', { queue, tenant: theirs })).toBe(2);
    // The deployment's series are not a tenant's.
    expect(bound.families.map((family) => family.name)).not.toContain(
      'skiplock_stats_rolled_through_timestamp_seconds',
    );
    expect(bound.families.map((family) => family.name)).not.toContain('skiplock_queue_delivery_info');
    expect(operator.families.map((family) => family.name)).toContain('skiplock_stats_rolled_through_timestamp_seconds');
  });

  it('escapes label values', async () => {
    const tenant = `quote"back\\slash-${crypto.randomUUID().slice(0, 8)}`;
    const queue = uniqueName('metrics-escape');
    await enqueueJob(queue, { tenant });
    const { families } = await scrape(await createKey(['operator'], tenant));
    expect(value(families, 'skiplock_jobs_waiting', { queue, tenant })).toBe(1);
  });

  it('refuses a key without the operator scope (403) and a request without a key (401), as problems', async () => {
    const read = await request('/metrics', { apiKey: await createKey(['read', 'enqueue', 'worker']) });
    const none = await request('/metrics');

    expect(read.status).toBe(403);
    expect(await problemOf(read)).toMatchObject({ status: 403 });
    expect(none.status).toBe(401);
    expect(await problemOf(none)).toMatchObject({ status: 401 });
  });
});
