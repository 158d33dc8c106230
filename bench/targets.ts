/**
 * The targets the issues set (6: the first benchmark; 14: storage that keeps
 * every job's history and still outruns graphile-worker; 15: the Workers
 * path; 40: keys), checked against a
 * run's medians. The benchmark reports them; it never bends its method to
 * meet them.
 */
import { KEY_COUNT, type WorkloadId } from './config';
import type { WorkloadReport } from './results';
import { formatNumber, median } from './stats';
import { SETUPS, type SetupName, type SystemName } from './systems/types';
import { FAIRNESS_KEYED_SUFFIX } from './workloads/fairness';
import { HELD_KEYS_CLAIM_METRIC, HELD_KEYS_RATIO_METRIC, HELD_KEYS_SHALLOW_VARIANT } from './workloads/held-keys';
import { KEYED_VARIANT_NAMES, KEYS_PLAIN_VARIANT, KEYS_RATIO_METRIC } from './workloads/keys';

interface Lookup {
  workload: WorkloadId;
  metric: string;
  system: SystemName;
  setup: SetupName;
  variant: (variant: string) => boolean;
}

/** The median of a figure; undefined when it was not measured or its gate failed. */
function find(workloads: readonly WorkloadReport[], lookup: Lookup): number | undefined {
  const measurement = workloads
    .find((w) => w.id === lookup.workload)
    ?.measurements.find(
      (m) =>
        m.metric === lookup.metric &&
        m.system === lookup.system &&
        m.setup === lookup.setup &&
        lookup.variant(m.variant),
    );
  if (measurement === undefined || measurement.failures.length > 0 || measurement.values.length === 0) return undefined;
  return median(measurement.values);
}

const verdict = (met: boolean) => (met ? '**met**' : '**not met**');
const is = (expected: string) => (variant: string) => variant === expected;

const ratio = (value: number) => `${formatNumber(value)}×`;

export function targetLines(workloads: readonly WorkloadReport[]): string[] {
  const lines: string[] = [];
  const figure = (lookup: Lookup) => find(workloads, lookup);

  for (const variant of ['1 worker', '8 workers', '32 workers']) {
    const at = (system: SystemName) =>
      figure({ workload: 'burn-down', metric: 'jobs/s', system, setup: 'tuned', variant: is(variant) });
    const [skiplock, graphile] = [at('skiplock'), at('graphile-worker')];
    if (skiplock === undefined || graphile === undefined) continue;
    const stretch = variant === '32 workers' ? '' : ` Stretch, 1.5×: ${verdict(skiplock >= 1.5 * graphile)}.`;
    lines.push(
      `Burn-down, ${variant}, tuned against tuned: skiplock ${formatNumber(skiplock)} jobs/s, graphile-worker ${formatNumber(graphile)} ` +
        `(${ratio(skiplock / graphile)}). At least graphile-worker's: ${verdict(skiplock >= graphile)}.${stretch}`,
    );
  }

  for (const setup of SETUPS) {
    const cost = (system: SystemName, metric: string) =>
      figure({ workload: 'cost', metric, system, setup, variant: () => true });
    const wal = (system: SystemName) => {
      const [enqueue, work] = [cost(system, 'WAL bytes per job, enqueue'), cost(system, 'WAL bytes per job, work')];
      return enqueue === undefined || work === undefined ? undefined : enqueue + work;
    };
    const [walSkiplock, walGraphile] = [wal('skiplock'), wal('graphile-worker')];
    if (walSkiplock !== undefined && walGraphile !== undefined) {
      lines.push(
        `WAL bytes per job (enqueue + work), ${setup}: skiplock ${formatNumber(walSkiplock)}, graphile-worker ${formatNumber(walGraphile)} ` +
          `(${ratio(walSkiplock / walGraphile)}). At most 1.5×: ${verdict(walSkiplock <= 1.5 * walGraphile)}.`,
      );
    }
    const [bytesSkiplock, bytesGraphile] = [
      cost('skiplock', 'table + index bytes each job adds'),
      cost('graphile-worker', 'table + index bytes each job adds'),
    ];
    if (bytesSkiplock !== undefined && bytesGraphile !== undefined) {
      lines.push(
        `Table + index bytes each job adds, ${setup}: skiplock ${formatNumber(bytesSkiplock)}, graphile-worker ${formatNumber(bytesGraphile)} ` +
          `(${ratio(bytesSkiplock / bytesGraphile)}). At most 2×: ${verdict(bytesSkiplock <= 2 * bytesGraphile)}.`,
      );
    }
    const [keptSkiplock, keptPgBoss] = [
      cost('skiplock', 'bytes a finished job keeps'),
      cost('pg-boss', 'bytes a finished job keeps'),
    ];
    if (keptSkiplock !== undefined && keptPgBoss !== undefined) {
      lines.push(
        `Bytes a finished job keeps over the retention period, ${setup}: skiplock ${formatNumber(keptSkiplock)}, pg-boss ${formatNumber(keptPgBoss)} ` +
          `(${ratio(keptSkiplock / keptPgBoss)}). No more than pg-boss's: ${verdict(keptSkiplock <= keptPgBoss)}.`,
      );
    }
  }

  for (const setup of SETUPS) {
    const at = (system: SystemName, metric: string) =>
      figure({ workload: 'latency', metric, system, setup, variant: is('wake-up: listen') });
    const figures = ['p50 ms', 'p99 ms'].map(
      (metric) => [at('skiplock', metric), at('graphile-worker', metric)] as const,
    );
    if (figures.some(([skiplock, graphile]) => skiplock === undefined || graphile === undefined)) continue;
    const [[p50, graphileP50], [p99, graphileP99]] = figures as [[number, number], [number, number]];
    const [first, graphileFirst] = [at('skiplock', 'first job ms'), at('graphile-worker', 'first job ms')];
    const firstJob =
      first === undefined || graphileFirst === undefined
        ? ''
        : ` (The first job after start, not a sample: skiplock ${formatNumber(first)} ms, graphile-worker ${formatNumber(graphileFirst)} ms.)`;
    lines.push(
      `Idle pickup latency with LISTEN, ${setup}: skiplock p50 ${formatNumber(p50)} ms / p99 ${formatNumber(p99)} ms, graphile-worker ` +
        `${formatNumber(graphileP50)} / ${formatNumber(graphileP99)} ms. No worse than graphile-worker's: ${verdict(p50 <= graphileP50 && p99 <= graphileP99)}.` +
        firstJob,
    );
  }

  const enqueue = (system: SystemName, variant: string) =>
    figure({ workload: 'enqueue', metric: 'jobs/s', system, setup: 'defaults', variant: is(variant) });
  const [batch, batchGraphile] = [
    enqueue('skiplock', '1,000 jobs per call'),
    enqueue('graphile-worker', '1,000 jobs per call'),
  ];
  if (batch !== undefined && batchGraphile !== undefined) {
    lines.push(
      `Batch enqueue of 1,000: skiplock ${formatNumber(batch)} jobs/s, graphile-worker ${formatNumber(batchGraphile)} (${ratio(batch / batchGraphile)}). ` +
        `At least graphile-worker's: ${verdict(batch >= batchGraphile)}.`,
    );
  }
  const single = enqueue('skiplock', 'one job per call');
  const peers = (['pg-boss', 'graphile-worker'] as const)
    .map((system) => enqueue(system, 'one job per call'))
    .filter((value) => value !== undefined);
  if (single !== undefined && peers.length > 0) {
    const best = Math.max(...peers);
    lines.push(
      `Single enqueue: skiplock ${formatNumber(single)} jobs/s, the best peer ${formatNumber(best)} (${ratio(single / best)}). ` +
        `At least the best peer's: ${verdict(single >= best)}.`,
    );
  }

  for (const setup of SETUPS) {
    const kept = (system: SystemName) =>
      figure({ workload: 'snapshot', metric: 'held / before', system, setup, variant: () => true });
    const [skiplock, graphile] = [kept('skiplock'), kept('graphile-worker')];
    if (skiplock === undefined || graphile === undefined) continue;
    lines.push(
      `Held snapshot, ${setup}: skiplock keeps ${formatNumber(skiplock)} of its throughput, graphile-worker ${formatNumber(graphile)}. ` +
        `At least graphile-worker's share: ${verdict(skiplock >= graphile)}.`,
    );
  }

  for (const metric of ['cycle p50 ms', 'claim statement mean ms']) {
    const at = (deep: boolean) =>
      figure({
        workload: 'depth',
        metric,
        system: 'skiplock',
        setup: 'defaults',
        variant: (variant) => variant.endsWith('claim 1') && variant.includes('finished') === deep,
      });
    const [shallow, deep] = [at(false), at(true)];
    if (shallow === undefined || deep === undefined) continue;
    lines.push(
      `Claim depth (${metric}, claim 1): skiplock ${formatNumber(shallow)} ms at 1,000 waiting, ${formatNumber(deep)} ms deep: ` +
        `${formatNumber(deep / shallow)}×. Within 1.5×: ${verdict(deep <= 1.5 * shallow)}.`,
    );
  }
  for (const setup of SETUPS) {
    const position = (keyed: boolean) =>
      figure({
        workload: 'fairness',
        metric: 'first small-tenant start (position)',
        system: 'skiplock',
        setup,
        variant: (variant) => variant.endsWith(FAIRNESS_KEYED_SUFFIX) === keyed,
      });
    const [plain, keyed] = [position(false), position(true)];
    if (plain !== undefined) {
      lines.push(
        `Fairness, ${setup}: the small tenant's first job started as job #${formatNumber(plain)}. Within the first 20: ${verdict(plain <= 20)}.`,
      );
    }
    if (keyed !== undefined) {
      lines.push(
        `Fairness with keys, ${setup} (the big tenant's jobs on ${KEY_COUNT.toLocaleString('en-US')} keys of one slot): the small ` +
          `tenant's first job started as job #${formatNumber(keyed)}. Within the first 20: ${verdict(keyed <= 20)}.`,
      );
    }
  }

  // Issue 40: the claim with keys in use, against the same jobs without keys in the same repetitions.
  for (const setup of SETUPS) {
    const keys = (metric: string, variant: string) =>
      figure({ workload: 'keys', metric, system: 'skiplock', setup, variant: is(variant) });
    const without = keys('jobs/s', KEYS_PLAIN_VARIANT);
    for (const [kind, variant] of Object.entries(KEYED_VARIANT_NAMES)) {
      const [keyed, ratioOfRuns] = [keys('jobs/s', variant), keys(KEYS_RATIO_METRIC, variant)];
      if (without === undefined || keyed === undefined || ratioOfRuns === undefined) continue;
      const what = kind === 'serial' ? 'one job at a time per key' : 'a rate key per job';
      lines.push(
        `Keys, ${setup}, ${what} over ${KEY_COUNT.toLocaleString('en-US')} keys: skiplock ${formatNumber(keyed)} jobs/s against ` +
          `${formatNumber(without)} without keys (${ratio(ratioOfRuns)}, the median of the repetitions' ratios). ` +
          `At least 0.8×: ${verdict(ratioOfRuns >= 0.8)}.`,
      );
    }
  }

  const held = (metric: string, deep: boolean) =>
    figure({
      workload: 'held-keys',
      metric,
      system: 'skiplock',
      setup: 'defaults',
      variant: (variant) => (variant === HELD_KEYS_SHALLOW_VARIANT) !== deep,
    });
  const [shallowClaim, deepClaim, deepRatio] = [
    held(HELD_KEYS_CLAIM_METRIC, false),
    held(HELD_KEYS_CLAIM_METRIC, true),
    held(HELD_KEYS_RATIO_METRIC, true),
  ];
  if (shallowClaim !== undefined && deepClaim !== undefined && deepRatio !== undefined) {
    const { deepJobs, keys } = workloads.find((w) => w.id === 'held-keys')!.parameters;
    lines.push(
      `Claim beside held keys (claim 1, median): skiplock ${formatNumber(shallowClaim)} ms with 1,000 plain jobs waiting, ` +
        `${formatNumber(deepClaim)} ms with ${Number(deepJobs).toLocaleString('en-US')} over ${Number(keys).toLocaleString('en-US')} ` +
        `held keys (${ratio(deepRatio)}, the median of the repetitions' ratios). ` +
        `Within 1.5×: ${verdict(deepRatio <= 1.5)}.`,
    );
  }

  // Issue 15: through the Worker alone, with fan-out (its Paid default) and without.
  const worker = (metric: string, variant: string) =>
    figure({ workload: 'workers', metric, system: 'skiplock', setup: 'defaults', variant: is(variant) });
  const [noop, noopAlone] = [worker('no-op jobs/s', 'fan-out 8'), worker('no-op jobs/s', 'fan-out off')];
  if (noop !== undefined) {
    const alone = noopAlone === undefined ? '' : ` (${formatNumber(noopAlone)} with fan-out off)`;
    lines.push(
      `Through the Worker, no-op jobs: ${formatNumber(noop)} jobs/s with fan-out${alone}. At least 5,000: ${verdict(noop >= 5000)}.`,
    );
  }
  const [io, ioAlone] = [worker('50 ms I/O jobs/s', 'fan-out 8'), worker('50 ms I/O jobs/s', 'fan-out off')];
  if (io !== undefined) {
    const alone = ioAlone === undefined ? '' : ` (${formatNumber(ioAlone)} with fan-out off)`;
    lines.push(
      `Through the Worker, jobs that wait 50 ms: ${formatNumber(io)} jobs/s with fan-out${alone}. ` +
        `At least 10× the 91 jobs/s issue 15 started from: ${verdict(io >= 910)}.`,
    );
  }
  const [requests, p99] = [worker('enqueue requests/s', 'fan-out 8'), worker('enqueue p99 ms', 'fan-out 8')];
  if (requests !== undefined && p99 !== undefined) {
    lines.push(
      `Through the Worker, 64 clients enqueueing single jobs: ${formatNumber(requests)} requests/s, p99 ${formatNumber(p99)} ms. ` +
        `At least 2,000 with p99 under 50 ms: ${verdict(requests >= 2000 && p99 < 50)}.`,
    );
  }
  // Durable steps: no-op steps against no-op jobs in the same repetitions, and the statements the steps cost.
  for (const setup of SETUPS) {
    const steps = (metric: string, variant: string) =>
      figure({ workload: 'steps', metric, system: 'skiplock', setup, variant: is(variant) });
    const variants = (workloads.find((w) => w.id === 'steps')?.measurements ?? [])
      .filter((m) => m.system === 'skiplock' && m.setup === setup && m.metric === 'steps/s')
      .map((m) => m.variant);
    for (const variant of variants) {
      const [perSecond, jobs, ratioOfRuns, statements] = [
        steps('steps/s', variant),
        steps('no-op jobs/s', variant),
        steps('steps/s ÷ no-op jobs/s', variant),
        steps('statements per step', variant),
      ];
      if (perSecond === undefined || jobs === undefined || ratioOfRuns === undefined || statements === undefined)
        continue;
      lines.push(
        `Durable steps, ${setup}, ${variant}: ${formatNumber(perSecond)} steps/s against ${formatNumber(jobs)} no-op jobs/s ` +
          `(${ratio(ratioOfRuns)}, the median of the repetitions' ratios). At least 0.5×: ${verdict(ratioOfRuns >= 0.5)}. ` +
          `${formatNumber(statements)} statements per step; at most 1: ${verdict(statements <= 1)}.`,
      );
    }
  }
  return lines.length > 0 ? lines : ['The workloads the targets need did not run (or failed their gates).'];
}
