/**
 * The targets issue 6 sets, checked against a run's medians. The benchmark
 * reports them; it never bends its method to meet them.
 */
import type { WorkloadId } from './config';
import type { WorkloadReport } from './results';
import { formatNumber, median } from './stats';
import { SETUPS, type SetupName, type SystemName } from './systems/types';

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
      (m) => m.metric === lookup.metric && m.system === lookup.system && m.setup === lookup.setup && lookup.variant(m.variant),
    );
  if (measurement === undefined || measurement.failures.length > 0 || measurement.values.length === 0) return undefined;
  return median(measurement.values);
}

const verdict = (met: boolean) => (met ? '**met**' : '**not met**');
const is = (expected: string) => (variant: string) => variant === expected;

export function targetLines(workloads: readonly WorkloadReport[]): string[] {
  const lines: string[] = [];
  for (const variant of ['1 worker', '8 workers', '32 workers']) {
    const at = (system: SystemName) => find(workloads, { workload: 'burn-down', metric: 'jobs/s', system, setup: 'tuned', variant: is(variant) });
    const [skiplock, graphile, boss] = [at('skiplock'), at('graphile-worker'), at('pg-boss')];
    if (skiplock === undefined || graphile === undefined || boss === undefined) continue;
    lines.push(
      `Burn-down, ${variant}, tuned against tuned: skiplock ${formatNumber(skiplock)} jobs/s, graphile-worker ${formatNumber(graphile)}, ` +
        `pg-boss ${formatNumber(boss)}. At least graphile-worker's and 3× pg-boss's: ${verdict(skiplock >= graphile && skiplock >= 3 * boss)}.`,
    );
  }
  for (const setup of SETUPS) {
    const at = (system: SystemName, metric: string) => find(workloads, { workload: 'latency', metric, system, setup, variant: is('wake-up: listen') });
    const figures = ['p50 ms', 'p99 ms'].map((metric) => [at('skiplock', metric), at('graphile-worker', metric)] as const);
    if (figures.some(([skiplock, graphile]) => skiplock === undefined || graphile === undefined)) continue;
    const [[p50, graphileP50], [p99, graphileP99]] = figures as [[number, number], [number, number]];
    lines.push(
      `Idle pickup latency with LISTEN, ${setup}: skiplock p50 ${formatNumber(p50)} ms / p99 ${formatNumber(p99)} ms, graphile-worker ` +
        `${formatNumber(graphileP50)} / ${formatNumber(graphileP99)} ms. No worse than graphile-worker's: ${verdict(p50 <= graphileP50 && p99 <= graphileP99)}.`,
    );
  }
  for (const metric of ['cycle p50 ms', 'claim statement mean ms']) {
    const at = (deep: boolean) =>
      find(workloads, {
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
    const position = find(workloads, { workload: 'fairness', metric: 'first small-tenant start (position)', system: 'skiplock', setup, variant: () => true });
    if (position === undefined) continue;
    lines.push(`Fairness, ${setup}: the small tenant's first job started as job #${formatNumber(position)}. Within the first 20: ${verdict(position <= 20)}.`);
  }
  return lines.length > 0 ? lines : ['The workloads the targets need did not run (or failed their gates).'];
}
