/**
 * `NEON_PROXY_ROUND_TRIP_MS=0,20,50 npm run bench:workerd`: the Worker path
 * measured at each round trip in one run, as a table with issue 42's
 * targets marked met or not. With UPDATE_BENCHMARKS=1 the table goes into
 * docs/benchmarks.md, between its markers; the full benchmark keeps that
 * section when it rewrites the page (bench/report.ts).
 */
import { readFile, writeFile } from 'node:fs/promises';
import type { NetworkDelay } from '../src/local/neon-proxy';
import type { CpuSpent } from './cpu';
import { formatNumber } from './stats';
import type { BurnDown, Burst, SerialEnqueues } from './worker-workloads';

type CpuPer = Record<keyof CpuSpent, number | undefined>;

/** What one pass of bench:workerd measured at one round trip (the JSON it prints, less its cost inputs). */
export interface RoundTripRun {
  networkDelay: NetworkDelay;
  measuredAt: string;
  loadAverage: number[];
  single: SerialEnqueues;
  batch: SerialEnqueues;
  idleStart: SerialEnqueues;
  /** CPU per request and per job of each party (bench/cpu.ts); workerd's is the Worker's. */
  burst: Burst & { cpuMsPerRequest: CpuPer };
  noop: BurnDown & { cpuMsPerJob: CpuPer; tripsPerJob: { http: number; webSocket: number } };
  io: BurnDown & { cpuMsPerJob: CpuPer };
}

/** The round trips of one run: NEON_PROXY_ROUND_TRIP_MS as a comma-separated list (one value: one pass). */
export function roundTripsFrom(value: string | undefined): number[] {
  const listed = (value ?? '0').split(',').map((entry) => entry.trim());
  const roundTrips = listed.map(Number);
  if (listed.some((entry) => entry === '') || roundTrips.some((ms) => !Number.isFinite(ms) || ms < 0)) {
    throw new Error(
      `NEON_PROXY_ROUND_TRIP_MS must be milliseconds from 0, or a list of them like 0,20,50, not "${value}"`,
    );
  }
  return roundTrips;
}

const START = '<!-- bench:workerd round trips -->';
const END = '<!-- /bench:workerd round trips -->';

/** Issue 42's targets at the largest round trip measured, each with its figure: "… **met**." */
export function roundTripTargets(runs: readonly RoundTripRun[]): string[] {
  const far = runs.reduce((a, b) => (b.networkDelay.roundTripMs > a.networkDelay.roundTripMs ? b : a));
  const near = runs.find((run) => run.networkDelay.roundTripMs === 0);
  const rtt = far.networkDelay.roundTripMs;
  const verdict = (met: boolean) => (met ? '**met**' : '**not met**');
  const ms = (value: number) => `${formatNumber(value)} ms`;
  const lines: string[] = [];
  if (rtt > 0) {
    const single = far.single.latencyMs.p50;
    lines.push(
      `A single enqueue at ${rtt} ms: p50 ${ms(single)}, the round trip plus ${ms(single - rtt)}. At most plus 5 ms: ${verdict(single <= rtt + 5)}.`,
    );
    const start = far.idleStart.sentToStartMs?.p50;
    if (start !== undefined)
      lines.push(
        `A job enqueued on an idle system at ${rtt} ms starts (p50) ${ms(start)} after its send. Within two round trips plus 10 ms (${ms(2 * rtt + 10)}): ${verdict(start <= 2 * rtt + 10)}.`,
      );
    if (near !== undefined) {
      const share = far.noop.drainJobsPerSecond / near.noop.drainJobsPerSecond;
      lines.push(
        `No-op jobs through the Worker at ${rtt} ms, from the first start to the last end: ${formatNumber(far.noop.drainJobsPerSecond)} a second, ${share.toFixed(2)}x of ${formatNumber(near.noop.drainJobsPerSecond)} at 0 ms. At least 0.8x: ${verdict(share >= 0.8)}.`,
      );
    }
  }
  const cpuPerRequest = runs.map((run) => run.burst.cpuMsPerRequest.workerd).filter((cpu) => cpu !== undefined);
  if (cpuPerRequest.length > 0) {
    const worst = Math.max(...cpuPerRequest);
    lines.push(
      `workerd CPU per single enqueue request: ${cpuPerRequest.map((cpu) => cpu.toFixed(2)).join(' / ')} ms. At most 0.5 ms: ${verdict(worst <= 0.5)}.`,
    );
  }
  const cpuPerJob = runs.map((run) => run.noop.cpuMsPerJob.workerd).filter((cpu) => cpu !== undefined);
  if (cpuPerJob.length > 0) {
    const worst = Math.max(...cpuPerJob);
    lines.push(
      `workerd CPU per drained no-op job: ${cpuPerJob.map((cpu) => cpu.toFixed(2)).join(' / ')} ms. At most 0.1 ms: ${verdict(worst <= 0.1)}.`,
    );
  }
  return lines;
}

/** The run as a table, one column per round trip. */
export function roundTripTable(runs: readonly RoundTripRun[]): string[] {
  const pair = (figures: { p50: number; p99: number } | undefined) =>
    figures === undefined ? '' : `${formatNumber(figures.p50)} / ${formatNumber(figures.p99)}`;
  const cpu = (value: number | undefined, digits: number) => (value === undefined ? '' : value.toFixed(digits));
  const rows: Array<[string, (run: RoundTripRun) => string]> = [
    ['one client, single enqueue: p50 / p99 (ms)', (run) => pair(run.single.latencyMs)],
    ['one client, batch of 100: p50 / p99 (ms)', (run) => pair(run.batch.latencyMs)],
    ['a job enqueued on an idle system, send to start: p50 / p99 (ms)', (run) => pair(run.idleStart.sentToStartMs)],
    ['64 clients enqueueing single jobs (requests/s)', (run) => formatNumber(run.burst.enqueuesPerSecond)],
    ['workerd CPU per enqueue request in that burst (ms)', (run) => cpu(run.burst.cpuMsPerRequest.workerd, 2)],
    [
      'no-op jobs, a backlog drained by the Worker, first start to last end (jobs/s)',
      (run) => formatNumber(run.noop.drainJobsPerSecond),
    ],
    [
      'the same, from the resume sent until all were seen finished (jobs/s)',
      (run) => formatNumber(run.noop.jobsPerSecond),
    ],
    ['workerd CPU per drained no-op job (ms)', (run) => cpu(run.noop.cpuMsPerJob.workerd, 2)],
    ['jobs of 50 ms of I/O (jobs/s)', (run) => formatNumber(run.io.jobsPerSecond)],
    ['requests to the database per no-op job', (run) => run.noop.tripsPerJob.http.toFixed(3)],
  ];
  return [
    `| | ${runs.map((run) => `${run.networkDelay.roundTripMs} ms`).join(' | ')} |`,
    `| --- | ${runs.map(() => '---:').join(' | ')} |`,
    ...rows.map(([name, of]) => `| ${name} | ${runs.map(of).join(' | ')} |`),
  ];
}

/** The section docs/benchmarks.md carries for this run, between its markers. */
export function roundTripSection(runs: readonly RoundTripRun[], command: string): string {
  const loads = runs.map((run) => run.loadAverage[0]?.toFixed(1) ?? '?').join(', ');
  return [
    START,
    '## (r) The Worker with its database a round trip away',
    '',
    `Produced by \`${command}\` on ${runs[0]!.measuredAt.slice(0, 10)}: the reference Worker in workerd, its database ` +
      'reached through the local Neon proxy playing each round trip ([workers.md](workers.md#the-database-a-round-trip-away) ' +
      `says what that models), one pass per column, the Worker's default settings. Machine load average (1 min) at the end of each pass: ${loads}. ` +
      `The burn-downs enqueue their jobs (${formatNumber(runs[0]!.noop.jobs)} no-op) into a paused queue and resume it, which starts a drain; ` +
      'here the drain, its helpers and the cron share one isolate, whose JavaScript runs on one thread at a time, where deployed helpers each have their own.',
    '',
    ...roundTripTargets(runs).map((line) => `- ${line}`),
    '',
    ...roundTripTable(runs),
    END,
  ].join('\n');
}

/** docs/benchmarks.md with `section` in place of the one it carries (or added at its end). */
export function withRoundTripSection(markdown: string, section: string): string {
  const start = markdown.indexOf(START);
  const end = markdown.indexOf(END);
  if (start < 0 || end < start) return `${markdown.trimEnd()}\n\n${section}\n`;
  return `${markdown.slice(0, start)}${section}${markdown.slice(end + END.length)}`;
}

/** The section a page carries, to keep when the page is rewritten; empty when it has none. */
export function roundTripSectionOf(markdown: string): string {
  const start = markdown.indexOf(START);
  const end = markdown.indexOf(END);
  return start < 0 || end < start ? '' : markdown.slice(start, end + END.length);
}

export const BENCHMARKS_PAGE = new URL('../docs/benchmarks.md', import.meta.url);

export async function updateBenchmarksPage(section: string): Promise<void> {
  await writeFile(BENCHMARKS_PAGE, withRoundTripSection(await readFile(BENCHMARKS_PAGE, 'utf8'), section));
}
