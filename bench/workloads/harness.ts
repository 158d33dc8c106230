import type { BenchOptions } from '../config';
import type { CpuMeter } from '../cpu';
import { JobLedger, type GateResult } from '../ledger';
import { createDatabase, disconnectAll, inFreshDatabase, type BenchDatabase, type BenchServer } from '../postgres';
import { incident, progress } from '../progress';
import type { Figure, WorkloadReport } from '../results';
import { formatNumber } from '../stats';
import type { QueueSystem, RunningWorkers, SetupName, SystemDriver } from '../systems/types';

export interface WorkloadContext {
  server: BenchServer;
  options: BenchOptions;
  drivers: readonly SystemDriver[];
  /** Databases with a preloaded backlog, made once per run and copied for each repetition; main drops them at the end. */
  backlogs: Map<string, Backlog>;
  /** CPU time of the server and this process, where the server runs on this machine. */
  cpu: CpuMeter | undefined;
}

/** A database holding `jobs` waiting jobs, numbered from 0, that repetitions start from a copy of. */
export interface Backlog {
  database: string;
  jobs: number;
}

export type Workload = (context: WorkloadContext) => Promise<WorkloadReport>;

/**
 * Opens the system on a fresh database (a copy of `backlog` when given),
 * runs `work`, and closes and drops everything, whatever happens.
 */
export function withSystem<T>(
  context: WorkloadContext,
  driver: SystemDriver,
  setup: SetupName,
  label: string,
  work: (system: QueueSystem, db: BenchDatabase) => Promise<T>,
  backlog?: Backlog,
): Promise<T> {
  return inFreshDatabase(
    context.server,
    `${driver.name}_${label}`,
    async (db) => {
      const system = await driver.open(db.url, setup);
      try {
        return await work(system, db);
      } finally {
        await system.close();
      }
    },
    backlog?.database,
  );
}

/**
 * The backlog `load` puts in through the system's own API, made once per
 * run, system and label: loading 100,000 jobs for every repetition would
 * take longer than the repetitions. Enqueueing reads no worker setting, so
 * one backlog serves both setups. It is analyzed before it is copied, as
 * autovacuum analyzes a table that grew this much within its first minute
 * on a live system: without planner statistics a library's claim can take
 * another plan (graphile-worker's fell to a quarter of its rate), and
 * whether autovacuum happened to get there first made figures swing
 * between runs.
 */
export async function preloadedBacklog(
  context: WorkloadContext,
  driver: SystemDriver,
  label: string,
  load: (system: QueueSystem, ledger: JobLedger) => Promise<void>,
): Promise<Backlog> {
  const key = `${driver.name}/${label}`;
  const existing = context.backlogs.get(key);
  if (existing !== undefined) return existing;
  const db = await createDatabase(context.server, `${driver.name}_${label}_backlog`);
  const ledger = new JobLedger();
  const system = await driver.open(db.url, 'defaults');
  try {
    await load(system, ledger);
    await db.probe.query('ANALYZE');
  } finally {
    await system.close();
    await db.release();
  }
  await disconnectAll(context.server, db.name);
  const backlog = { database: db.name, jobs: ledger.enqueued };
  context.backlogs.set(key, backlog);
  return backlog;
}

/** Completions a library still sends after its stop() resolved get this long to land. */
const AFTER_STOP_MS = 300;
/**
 * How long a library's graceful stop may take. A stop that never returns
 * (graphile-worker's, after its local queue failed to hand its jobs back)
 * would hang the benchmark: the run goes on without it, an incident, and
 * the gate judges what it left.
 */
const STOP_LIMIT_MS = 60_000;

/** Stops the workers through the library's graceful stop, then holds what the ledger saw against the database. */
export async function stopAndGate(
  workers: RunningWorkers,
  system: QueueSystem,
  ledger: JobLedger,
): Promise<GateResult> {
  await stopWorkers(workers, system);
  return ledger.gate(await system.inventory());
}

/** The library's graceful stop, and a moment for the completions it still sends after that. */
export async function stopWorkers(workers: RunningWorkers, system: QueueSystem): Promise<void> {
  const stopped = await Promise.race([workers.stop().then(() => true), sleep(STOP_LIMIT_MS).then(() => false)]);
  if (!stopped) incident(system.name, `its graceful stop did not return within ${STOP_LIMIT_MS / 1000} s`);
  await sleep(AFTER_STOP_MS);
}

/** One gate for a figure made of two runs: passed when both did. */
export function bothGates(a: GateResult, b: GateResult): GateResult {
  const problems = [...a.problems, ...b.problems];
  return {
    passed: problems.length === 0,
    problems,
    unrecordedCompletions: a.unrecordedCompletions + b.unrecordedCompletions,
  };
}

/** 1, 2, ... reps (at least `atLeast`, for a workload that needs more than the run's). */
export function repetitions(context: WorkloadContext, atLeast = 0): number[] {
  return Array.from({ length: Math.max(context.options.reps, atLeast) }, (_, i) => i + 1);
}

/** One progress line for a finished repetition: its figures, or why its gate failed. */
export function reportRep(
  what: string,
  rep: number,
  context: WorkloadContext,
  gate: GateResult,
  figures: string,
  reps = context.options.reps,
): void {
  const unrecorded =
    gate.unrecordedCompletions > 0 ? ` [${gate.unrecordedCompletions} ran but left marked running by the stop]` : '';
  const outcome = gate.passed ? `${figures}${unrecorded}` : `gate failed: ${gate.problems.join('; ')}`;
  progress(`  ${what} rep ${rep}/${reps}: ${outcome}`);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Jobs started per second from now until `target` jobs have started, or `maxMs` has passed. */
export async function startsPerSecondUntil(ledger: JobLedger, target: number, maxMs: number): Promise<number> {
  const [startedAt, before] = [performance.now(), ledger.started];
  await ledger.whenStarted(target, maxMs);
  return ((ledger.started - before) * 1000) / (performance.now() - startedAt);
}

/** Figures for a progress line: "p50 ms 12.3, p99 ms 45.6". */
export function describeFigures(figures: readonly Figure[]): string {
  return figures.map((figure) => `${figure.metric} ${formatNumber(figure.value)}`).join(', ');
}
