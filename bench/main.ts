/**
 * `npm run bench`: skiplock, pg-boss and graphile-worker side by side on one
 * Postgres server, every workload of issue 6, written to docs/benchmarks.md
 * and docs/benchmarks.json. See bench/config.ts for sizes and options.
 */
import { writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { checkOutBaseline } from './baseline';
import { readOptions, WORKLOAD_IDS, type BenchOptions, type WorkloadId } from './config';
import { cpuMeter } from './cpu';
import { readEnvironment } from './environment';
import { dropDatabase, startBenchServer } from './postgres';
import { incident, incidents, progress } from './progress';
import { writeReport, type BenchReport } from './report';
import { DRIVERS } from './systems';
import { baselineDriver } from './systems/skiplock';
import { burnDownWorkload } from './workloads/burn-down';
import { ceilingWorkload } from './workloads/ceiling';
import { dbCostWorkload } from './workloads/db-cost';
import { depthWorkload } from './workloads/depth';
import { enqueueWorkload } from './workloads/enqueue';
import { fairnessWorkload } from './workloads/fairness';
import type { Backlog, Workload, WorkloadContext } from './workloads/harness';
import { heldKeysWorkload } from './workloads/held-keys';
import { heldSnapshotWorkload } from './workloads/held-snapshot';
import { keysWorkload } from './workloads/keys';
import { latencyWorkload } from './workloads/pickup-latency';
import { steadyStateWorkload } from './workloads/steady-state';
import { stepsWorkload } from './workloads/steps';
import { workersWorkload } from './workloads/workers';

/** In the order they run and the report shows them. */
const WORKLOADS: ReadonlyArray<[WorkloadId, Workload]> = [
  ['enqueue', enqueueWorkload],
  ['burn-down', burnDownWorkload],
  ['latency', latencyWorkload],
  ['snapshot', heldSnapshotWorkload],
  ['steady', steadyStateWorkload],
  ['depth', depthWorkload],
  ['fairness', fairnessWorkload],
  ['keys', keysWorkload],
  ['held-keys', heldKeysWorkload],
  ['cost', dbCostWorkload],
  ['ceiling', ceilingWorkload],
  ['workers', workersWorkload],
  ['steps', stepsWorkload],
];

/**
 * A full run of everything publishes its report; any other (quick, a subset
 * of workloads or systems, a baseline comparison) leaves it alone and
 * writes to the temporary folder.
 */
function reportFiles(options: BenchOptions): { markdown: string; json: string } {
  const everything =
    options.workloads.length === WORKLOAD_IDS.length && options.systems === undefined && options.baseline === undefined;
  if (options.scale.name === 'full' && everything) {
    return {
      markdown: new URL('../docs/benchmarks.md', import.meta.url).pathname,
      json: new URL('../docs/benchmarks.json', import.meta.url).pathname,
    };
  }
  const name = `skiplock-bench-${options.scale.name}${options.baseline === undefined ? '' : '-baseline'}`;
  return { markdown: join(tmpdir(), `${name}.md`), json: join(tmpdir(), `${name}.json`) };
}
/** Where each finished workload is saved, so a run that breaks off keeps what it measured. */
const PARTIAL = join(tmpdir(), 'skiplock-bench-partial.json');

/**
 * Dropping a repetition's database (WITH FORCE) ends the connections a
 * library still pools; a library pool without an error listener then throws
 * from an event. That is the harness's doing, not a fault of the system
 * under test: counted as an incident, and the run goes on. So does a
 * library's own failure in a call it left unawaited (below), which the
 * gate then judges.
 */
process.on('uncaughtException', (error: Error & { code?: string }) => {
  if (error.code === '57P01') {
    incident('postgres', `a pooled connection was ended by a database drop: ${error.message}`);
  } else if (error.code === '40P01' && error.stack?.includes('/pg-boss/')) {
    // pg-boss 10 completes a job without awaiting or catching the call; on
    // the keys workload's singleton queue a completion can deadlock with
    // another of its statements, and the rejection surfaces here. The library's doing, counted as its incident:
    // the job stays active, and the gate shows it.
    incident('pg-boss', `a completion it did not await deadlocked: ${error.message}`);
  } else {
    console.error(error);
    process.exit(1);
  }
});

async function main(): Promise<void> {
  const options = readOptions(process.argv.slice(2), process.env);
  const selected = new Set(options.workloads);
  const baseline = options.baseline === undefined ? undefined : await checkOutBaseline(options.baseline);
  const chosen = DRIVERS.filter((driver) => options.systems === undefined || options.systems.includes(driver.name));
  if (chosen.length === 0) throw new Error(`no such system: ${options.systems?.join(', ')}`);
  if (baseline !== undefined && chosen[0]!.name !== 'skiplock')
    throw new Error('--baseline compares skiplock: keep skiplock in --systems');
  // The baseline right after skiplock, so its ratio is the first in every table.
  const drivers =
    baseline === undefined ? chosen : [chosen[0]!, baselineDriver(baseline.root, baseline.ref), ...chosen.slice(1)];

  const startedAt = Date.now();
  progress(`skiplock benchmark, scale ${options.scale.name}, ${options.reps} repetitions: ${[...selected].join(', ')}`);
  const server = await startBenchServer(process.env.DATABASE_URL);
  const backlogs = new Map<string, Backlog>();
  try {
    const environment = await readEnvironment(server);
    progress(
      `${environment.postgres.version.split(' on ')[0]} (${server.origin}); Node ${environment.node}; ${environment.cpu.model} × ${environment.cpu.cores}`,
    );
    const context: WorkloadContext = { server, options, drivers, backlogs, cpu: await cpuMeter(server.adminUrl) };
    const report: BenchReport = {
      generatedAt: new Date(startedAt).toISOString(),
      command: options.command,
      scale: options.scale,
      reps: options.reps,
      minutes: 0,
      environment,
      systems: drivers.map(({ name, version, settings }) => ({ name, version, settings })),
      workloads: [],
      incidents: {},
    };
    for (const [id, workload] of WORKLOADS) {
      if (!selected.has(id)) continue;
      const start = loadavg()[0]!;
      const result = await workload(context);
      report.workloads.push({ ...result, loadAverage: { start, end: loadavg()[0]! } });
      report.minutes = (Date.now() - startedAt) / 60_000;
      report.incidents = incidents();
      await writeFile(PARTIAL, JSON.stringify(report, null, 2));
    }
    const files = reportFiles(options);
    await writeReport(report, files.markdown, files.json);
    progress(`done in ${report.minutes.toFixed(1)} minutes: ${files.markdown} and ${files.json}`);
  } finally {
    for (const backlog of backlogs.values()) await dropDatabase(server, backlog.database);
    await server.stop();
    baseline?.remove();
  }
}

await main().then(
  // A library under test can leave a timer or a socket behind; the benchmark is over either way.
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
