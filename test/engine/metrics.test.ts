import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/types';
import {
  cancel,
  claimBatch,
  compactJobCounts,
  complete,
  enqueueBatch,
  expireJobs,
  fail,
  queueMetrics,
  reapExpiredLeases,
  rollUpAttemptStats,
  setQueue,
  type DeliveryTarget,
  type QueueMetrics,
} from '../../src/engine';
import { prometheusText } from '../../src/http/prometheus-text';
import { endedDaysAgo } from '../support/attempts';
import { engineDatabases } from '../support/engine-db';

const open = engineDatabases();
const hook: DeliveryTarget = {
  target: 'webhook',
  url: 'https://hooks.example.com/in',
  secretName: 'HOOK_SECRET',
  batchSize: 50,
};

/**
 * In queue `work` of tenant acme, six jobs: one succeeds, one fails and
 * retries in an hour, one fails for good, one is cancelled while running,
 * one's lease lapses (it waits again), and one expires before it starts.
 * In queue `outbox` (a webhook delivery target), two deliveries: one
 * delivered, one refused for good. One job of tenant globex waits.
 */
async function endEachWay(db: Db): Promise<void> {
  await setQueue(db, 'outbox', { concurrency: null, weight: 1, delivery: hook });
  await enqueueBatch(db, [
    ...Array.from({ length: 5 }, () => ({ queue: 'work', tenant: 'acme' })),
    { queue: 'work', tenant: 'acme', delaySeconds: 3600, dedupKey: 'expires' },
    { queue: 'work', tenant: 'globex', delaySeconds: 3600 },
    { queue: 'outbox', tenant: 'acme' },
    { queue: 'outbox', tenant: 'acme' },
  ]);
  const [succeeds, retries, failsForGood, cancelled, lapses] = await claimBatch(db, {
    max: 10,
    workerId: 'w',
    queues: ['work'],
  });
  await complete(db, succeeds!);
  await fail(db, { ...retries!, error: 'planned', retryInSeconds: 3600 });
  await fail(db, { ...failsForGood!, error: 'planned', forGood: true });
  await cancel(db, cancelled!.id);
  await fail(db, { ...cancelled!, error: 'aborted' });
  await db.query({
    text: "UPDATE skiplock.jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
    params: [lapses!.id],
  });
  expect((await reapExpiredLeases(db)).map((job) => job.id)).toEqual([lapses!.id]);
  // The delayed one's expiry passes before it starts.
  await db.query({
    text: "UPDATE skiplock.jobs SET expires_at = now() - interval '1 second' WHERE dedup_key = 'expires'",
    params: [],
  });
  expect(await expireJobs(db)).toBe(1);

  const [delivered, refused] = await claimBatch(db, { max: 2, workerId: 'w', types: [], deliveryTargets: ['webhook'] });
  await complete(db, delivered!);
  await fail(db, { ...refused!, error: '410 Gone', forGood: true });
}

function row(rows: QueueMetrics[], queue: string, tenant: string): QueueMetrics {
  const found = rows.find((r) => r.queue === queue && r.tenant === tenant);
  if (found === undefined) throw new Error(`no metrics for ${queue} of ${tenant}`);
  return found;
}

/** The counts a scrape gives work and outbox of acme, after endEachWay. */
function expectEachWay(rows: QueueMetrics[]): void {
  expect(row(rows, 'work', 'acme')).toMatchObject({
    waiting: 2, // the retrying job and the one whose lease lapsed
    running: 0,
    started: 5,
    succeeded: 1,
    retried: 1,
    failed: 1,
    cancelled: 1,
    leaseExpired: 1,
    expired: 1,
    deliveryTarget: null,
  });
  // Only the attempts that ended with times: succeeded, retried, failed, cancelled.
  expect(row(rows, 'work', 'acme').runSeconds.count).toBe(4);
  expect(row(rows, 'work', 'acme').waitSeconds.count).toBe(4);
  expect(row(rows, 'outbox', 'acme')).toMatchObject({
    started: 2,
    succeeded: 1,
    failed: 1,
    retried: 0,
    leaseExpired: 0,
    deliveryTarget: 'webhook',
  });
}

type Families = ReturnType<typeof parsePrometheusTextFormat>;

function value(families: Families, name: string, labels: Record<string, string>): number | undefined {
  const family = families.find((f) => f.name === name);
  const series = family?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  return series !== undefined && 'value' in series ? Number(series.value) : undefined;
}

describe('queue metrics', () => {
  it('tell attempts started, succeeded, retried, failed for good, cancelled and cut off by a lapsed lease, and jobs expired', async () => {
    const { db } = await open('pg');
    await endEachWay(db);

    const metrics = await queueMetrics(db);
    expectEachWay(metrics.queues);
    expect(row(metrics.queues, 'work', 'globex')).toMatchObject({ waiting: 1, started: 0, succeeded: 0 });
    // A deployment's figure: the hour the statistics are rolled up through.
    expect(metrics.statsRolledThrough!.getTime()).toBeLessThanOrEqual(Date.now());
    expect(metrics.statsRolledThrough!.getTime()).toBeGreaterThan(Date.now() - 2 * 3_600_000);

    // Parsed as Prometheus would: every outcome a series of skiplock_attempts_total.
    const families = parsePrometheusTextFormat(prometheusText(metrics));
    const work = { queue: 'work', tenant: 'acme' };
    expect(value(families, 'skiplock_attempts_started_total', work)).toBe(5);
    expect(
      Object.fromEntries(
        ['succeeded', 'retried', 'failed', 'cancelled', 'lease_expired'].map((outcome) => [
          outcome,
          value(families, 'skiplock_attempts_total', { ...work, outcome }),
        ]),
      ),
    ).toEqual({ succeeded: 1, retried: 1, failed: 1, cancelled: 1, lease_expired: 1 });
    expect(value(families, 'skiplock_jobs_expired_total', work)).toBe(1);
    expect(families.find((f) => f.name === 'skiplock_queue_delivery_info')?.metrics).toEqual([
      { labels: { queue: 'outbox', tenant: 'acme', target: 'webhook' }, value: '1' },
    ]);
    expect(value(families, 'skiplock_stats_rolled_through_timestamp_seconds', {})).toBe(
      metrics.statsRolledThrough!.getTime() / 1000,
    );
  });

  it('give the same totals once the statistics have rolled the attempts up, and keep the attempts started through compaction', async () => {
    const { db } = await open('pg');
    await endEachWay(db);
    await endedDaysAgo(db, 1);
    const rollup = await rollUpAttemptStats(db, { keepDays: 30 });
    const compaction = await compactJobCounts(db);

    const metrics = await queueMetrics(db);

    expect(compaction.rowsAfter).toBeLessThan(compaction.rowsBefore);
    expect(rollup.rowsWritten).toBeGreaterThan(0);
    // Everything now comes from the daily rows: none ended since the rollup.
    const [recent] = await db.query<{ n: number }>({
      text: `SELECT ((SELECT count(*) FROM skiplock.job_events e, skiplock.attempt_stats_rollup r WHERE e.at >= r.rolled_through)
                  + (SELECT count(*) FROM skiplock.finished_jobs f, skiplock.attempt_stats_rollup r
                     WHERE f.finished_at >= r.rolled_through))::integer AS n`,
      params: [],
    });
    expect(recent!.n).toBe(0);
    expectEachWay(metrics.queues);
    expect(metrics.statsRolledThrough).toEqual(rollup.rolledThrough);
  });

  it("give a tenant-bound scope its own tenant's rows, without the deployment's figures", async () => {
    const { db } = await open('pg');
    await endEachWay(db);

    const metrics = await queueMetrics(db, { tenant: 'globex' });
    const text = prometheusText(metrics);

    expect(metrics.queues.map((r) => [r.queue, r.tenant, r.waiting])).toEqual([['work', 'globex', 1]]);
    expect(metrics.statsRolledThrough).toBeUndefined();
    expect((await queueMetrics(db, { tenant: 'acme' })).queues.map((r) => r.deliveryTarget)).toEqual([null, null]);
    expect(text).not.toContain('skiplock_queue_delivery_info');
    expect(text).not.toContain('skiplock_stats_rolled_through_timestamp_seconds');
    expect(new Set([...text.matchAll(/tenant="([^"]*)"/g)].map((match) => match[1]))).toEqual(new Set(['globex']));
  });
});
