import { describe, expect, it } from 'vitest';
import {
  type RoundTripRun,
  roundTripSection,
  roundTripSectionOf,
  roundTripsFrom,
  roundTripTargets,
  withRoundTripSection,
} from '../../bench/workerd-round-trips';

const cpu = (workerd: number) => ({ workerd, node: 0.1, postgres: undefined });

/** A pass at `roundTripMs`, with the figures given on top of ones that meet every target. */
function run(roundTripMs: number, figures: { single?: number; start?: number; noop?: number; cpu?: number } = {}) {
  const pair = (p50: number) => ({ p50, p99: p50 * 2 });
  const burnDown = {
    jobs: 10_000,
    enqueueSeconds: 1,
    seconds: 1.5,
    jobsPerSecond: 6500,
    drainJobsPerSecond: figures.noop ?? 8000,
    statementsPerJob: 0.05,
  };
  return {
    networkDelay: { roundTripMs, jitterMs: 0 },
    measuredAt: '2026-11-28T07:00:00.000Z',
    loadAverage: [1.25, 1, 1],
    single: { requests: 200, jobsPerRequest: 1, latencyMs: pair(figures.single ?? roundTripMs + 4) },
    batch: { requests: 50, jobsPerRequest: 100, latencyMs: pair(roundTripMs + 10) },
    idleStart: {
      requests: 50,
      jobsPerRequest: 1,
      latencyMs: pair(roundTripMs + 4),
      sentToStartMs: pair(figures.start ?? roundTripMs + 9),
    },
    burst: {
      clients: 64,
      seconds: 20,
      enqueued: 15_000,
      failed: 0,
      enqueuesPerSecond: 750,
      latencyMs: pair(80),
      enqueueToStartMs: pair(20),
      cpuMsPerRequest: cpu(figures.cpu ?? 0.4),
    },
    noop: { ...burnDown, cpuMsPerJob: cpu(0.05), tripsPerJob: { http: 0.03, webSocket: 0 } },
    io: { ...burnDown, jobsPerSecond: 1500, drainJobsPerSecond: 1600, cpuMsPerJob: cpu(0.08) },
  } satisfies RoundTripRun;
}

describe("bench:workerd's round-trip table", () => {
  it('reads a list of round trips, and refuses one that is not', () => {
    expect(roundTripsFrom(undefined)).toEqual([0]);
    expect(roundTripsFrom('0, 20,50')).toEqual([0, 20, 50]);
    expect(() => roundTripsFrom('0,,50')).toThrow(/a list of them like 0,20,50/);
    expect(() => roundTripsFrom('-5')).toThrow(/NEON_PROXY_ROUND_TRIP_MS must be/);
  });

  it("marks issue 42's targets at the largest round trip, met or not", () => {
    const met = roundTripTargets([run(0), run(50)]);
    expect(met).toHaveLength(5);
    expect(met.every((line) => line.endsWith('**met**.'))).toBe(true);
    const missed = roundTripTargets([
      run(0, { noop: 10_000 }),
      run(50, { single: 56, start: 111, noop: 7_900, cpu: 0.6 }),
    ]);
    expect(missed.filter((line) => line.endsWith('**not met**.'))).toEqual([
      'A single enqueue at 50 ms: p50 56 ms, the round trip plus 6 ms. At most plus 5 ms: **not met**.',
      'A job enqueued on an idle system at 50 ms starts (p50) 111 ms after its send. Within two round trips plus 10 ms (110 ms): **not met**.',
      'No-op jobs through the Worker at 50 ms, from the first start to the last end: 7,900 a second, 0.79x of 10,000 at 0 ms. At least 0.8x: **not met**.',
      'workerd CPU per single enqueue request: 0.40 / 0.60 ms. At most 0.5 ms: **not met**.',
    ]);
  });

  it('replaces its section of docs/benchmarks.md, or adds it, and hands it over to a rewrite of the page', () => {
    const section = roundTripSection([run(0), run(50)], 'NEON_PROXY_ROUND_TRIP_MS=0,50 npm run bench:workerd');
    expect(section).toContain('| one client, single enqueue: p50 / p99 (ms) | 4 / 8 | 54 / 108 |');
    const page = withRoundTripSection('# Benchmarks\n\n## Incidents\n', section);
    expect(roundTripSectionOf(page)).toBe(section);
    const newer = roundTripSection([run(0), run(20)], 'NEON_PROXY_ROUND_TRIP_MS=0,20 npm run bench:workerd');
    const replaced = withRoundTripSection(page, newer);
    expect(roundTripSectionOf(replaced)).toBe(newer);
    expect(replaced.startsWith('# Benchmarks\n\n## Incidents\n')).toBe(true);
    expect(roundTripSectionOf('# Benchmarks\n')).toBe('');
  });
});
