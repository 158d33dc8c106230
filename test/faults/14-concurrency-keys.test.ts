import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { EnqueueInput } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';
import { DRAINS, KEYED_TYPE, peakPerKey, PULL_WORKERS, runKeyScenario, seeded } from './support/keyed-ledger';
import { processes } from './support/processes';
import { recordScenario, seconds } from './support/report';

const open = engineDatabases();
const spawn = processes(join(tmpdir(), `skiplock-faults-keys-${process.pid}.log`));

const TENANTS = ['acme', 'globex'];
/** Per tenant: the same key names in both, with other limits. */
const KEYS = 30;
const JOBS = 2000;
const LEASE_SECONDS = 2;
const KILLS = 3;
/** One job in this many fails its first attempt. */
const FAIL_FIRST_ONE_IN = 12;

/** Limit 1, 2 or 3, different for a key name in each tenant. */
const limitOf = (tenant: number, key: number) => 1 + ((key + tenant) % 3);

/** Per key: jobs running, and jobs past their turn (waiting to start, running, retrying, parked), beside its limit. */
const sampleSql = /* sql */ `
SELECT kj.tenant, kj.key, kj.slots AS limit,
       count(*) FILTER (WHERE j.state = 'running')::integer AS running,
       count(*) FILTER (WHERE j.state <> 'held')::integer AS "pastTurn"
FROM skiplock.jobs j JOIN skiplock.keyed_jobs kj ON kj.job_id = j.id
GROUP BY kj.tenant, kj.key, kj.slots`;

describe('scenario 14: concurrency keys under 8 drains and 8 pull workers, workers killed mid-job', () => {
  it('never runs more of a key than its limit, and runs every job to success once', { timeout: 120_000 }, async () => {
    const { db, url } = await open('pg', 4);
    const random = seeded(14);
    const inputs: EnqueueInput[] = Array.from({ length: JOBS }, (_, i) => {
      const tenant = Math.floor(random() * TENANTS.length);
      const key = Math.floor(random() * KEYS);
      return {
        queue: 'keys',
        type: KEYED_TYPE,
        tenant: TENANTS[tenant]!,
        concurrencyKey: `acct-${key}`,
        concurrencyLimit: limitOf(tenant, key),
        payload: { seq: i, workMs: Math.round(3 + random() * 47), failFirst: random() * FAIL_FIRST_ONE_IN < 1 },
        leaseSeconds: LEASE_SECONDS,
        maxAttempts: 10,
        backoffBaseSeconds: 0.1,
        backoffMaxSeconds: 0.5,
      };
    });
    const failingFirst = inputs.filter((input) => (input.payload as { failFirst: boolean }).failFirst).length;

    let samplesAbove = 0;
    const sampledRunning = new Map<number, number>();
    const sampledPastTurn = new Map<number, number>();
    const run = await runKeyScenario(spawn, db, url, {
      inputs,
      kills: KILLS,
      async sample(sampler) {
        const rows = await sampler.query<{ limit: number; running: number; pastTurn: number }>({
          text: sampleSql,
          params: [],
        });
        for (const { limit, running, pastTurn } of rows) {
          sampledRunning.set(limit, Math.max(sampledRunning.get(limit) ?? 0, running));
          sampledPastTurn.set(limit, Math.max(sampledPastTurn.get(limit) ?? 0, pastTurn));
          if (running > limit || pastTurn > limit) samplesAbove += 1;
        }
      },
      during: async () => undefined,
    });
    const { attempts, cut } = run;

    const peaks = peakPerKey(attempts);
    const limits = new Map(attempts.map((attempt) => [`${attempt.tenant}/${attempt.key}`, attempt.limit]));
    const keysAbove = [...peaks].filter(([key, peak]) => peak > limits.get(key)!);
    const intervalPeak = new Map<number, number>();
    const keysAtLimit = new Map<number, number>();
    for (const [key, peak] of peaks) {
      const limit = limits.get(key)!;
      intervalPeak.set(limit, Math.max(intervalPeak.get(limit) ?? 0, peak));
      if (peak >= limit) keysAtLimit.set(limit, (keysAtLimit.get(limit) ?? 0) + 1);
    }
    const keysOf = (limit: number) => [...limits.values()].filter((l) => l === limit).length;
    const failedAttempts = attempts.filter((attempt) => attempt.outcome === 'failed').length;
    const peakLine = [1, 2, 3]
      .map(
        (limit) =>
          `limit ${limit} (${keysOf(limit)} keys): sampled running ${sampledRunning.get(limit) ?? 0}, past their turn ${sampledPastTurn.get(limit) ?? 0}, ` +
          `from attempt intervals ${intervalPeak.get(limit) ?? 0} (${keysAtLimit.get(limit) ?? 0} keys reached it)`,
      )
      .join('; ');
    await recordScenario({
      scenario: 14,
      name: 'Concurrency keys under contention',
      load:
        `${JOBS} jobs of ${TENANTS.length} tenants × ${KEYS} concurrency keys (limits 1 to 3, the same key names in both tenants with other limits), ` +
        `work of 3 to 50 ms, ${failingFirst} failing their first attempt; ${DRAINS} drain processes + ${PULL_WORKERS} pull-worker processes × 4, lease ${LEASE_SECONDS} s`,
      faults: `all 16 claimers at once; ${run.kills.length} SIGKILLs of workers mid-attempt (${cut} attempts cut), each replaced; ${run.samples} samples of the running jobs per key`,
      jobsLost: JOBS - run.counts.succeeded,
      runTwiceAtOnce: run.twice.length,
      limitViolations: samplesAbove + keysAbove.length,
      recovery: `all ${JOBS} done ${seconds(run.tookMs)} after the enqueue (each of the 16 first processes ran attempts: ${run.idle.length === 0 ? 'yes' : `not ${run.idle.join(', ')}`})`,
      notes: [
        `limit violations here: samples with a key's running jobs or jobs past their turn above its limit (${samplesAbove}), keys whose attempts (from the handlers' ledger, a killed attempt running until its kill) overlapped more than its limit (${keysAbove.length})`,
        `peak per key: ${peakLine}`,
        `${attempts.length} attempts for ${JOBS} jobs: ${failedAttempts} failed and retried, ${cut} cut by a kill and run again after their lease lapsed`,
      ],
    });

    expect(run.samplerError).toBeUndefined();
    expect(run.connected).toBe(DRAINS + PULL_WORKERS);
    expect(run.idle).toEqual([]);
    expect(run.kills.length).toBe(KILLS);
    expect(run.counts).toEqual({ total: JOBS, succeeded: JOBS });
    expect(samplesAbove).toBe(0);
    expect(keysAbove).toEqual([]);
    expect(run.twice).toEqual([]);
  });
});
