import { STEPS_CONCURRENCIES, STEPS_PER_JOB } from '../config';
import type { CpuReading } from '../cpu';
import { statementCounter, type StatementCount } from '../db-metrics';
import { JobLedger, type GateResult } from '../ledger';
import type { BenchDatabase } from '../postgres';
import { progress } from '../progress';
import { Results, type Figure } from '../results';
import { formatNumber } from '../stats';
import { SETUPS, type QueueSystem, type SetupName, type StepsHandler, type SystemDriver } from '../systems/types';
import {
  bothGates,
  preloadedBacklog,
  repetitions,
  reportRep,
  stopAndGate,
  withSystem,
  type Backlog,
  type Workload,
  type WorkloadContext,
} from './harness';
import { preload } from './produce';

/** How long workers may take to start their first job before the run counts as stuck. */
const FIRST_JOB_WAIT_MS = 30_000;

/** The statements of the step path, found in pg_stat_statements (or the client's count) by a piece of their text. */
const RECORD_STATEMENT = 'skiplock.record_steps(';
const isLoadStatement = (query: string) =>
  query.includes('FROM skiplock.job_steps') && query.includes('"failedAttempts"');

/**
 * (s) Durable steps, skiplock only (pg-boss and graphile-worker have none):
 * a backlog of jobs whose handler makes STEPS_PER_JOB no-op `ctx.step.do`
 * calls, drained by the Node worker exactly as the burn-down drains no-op
 * jobs (same setups, same worker, same connections), and in the same
 * repetition a burn-down of as many plain no-op jobs, so each repetition
 * gives steps per second over no-op jobs per second of the same moment.
 * Statements per step come from pg_stat_statements: the step path's two
 * statements (record_steps and the load of a job's recorded steps) over the
 * steps recorded.
 */
export const stepsWorkload: Workload = async (context) => {
  const { scale } = context.options;
  const results = new Results();
  const drivers = context.drivers.filter((driver) => driver.name.startsWith('skiplock'));
  const reps = repetitions(context, scale.stepsReps);
  for (const setup of SETUPS) {
    for (const concurrency of STEPS_CONCURRENCIES) {
      const variant = `${concurrency} workers`;
      progress(
        `(s) steps · ${setup} · ${variant}: ${scale.stepsJobs.toLocaleString('en-US')} jobs of ${STEPS_PER_JOB} steps, ` +
          'and as many no-op jobs',
      );
      for (const rep of reps) {
        for (const driver of drivers) {
          const backlog = await stepsBacklog(context, driver);
          const base = { system: driver.name, setup, variant };
          const noop = await noopRun(context, driver, setup, concurrency, backlog);
          const steps = await stepsRun(context, driver, setup, concurrency, backlog);
          const gate = bothGates(noop.gate, steps.gate);
          const ratio = steps.perSecond / noop.figure.value;
          // In the order the report shows them: the two rates and their ratio first.
          const [rate, ...costs] = steps.figures;
          results.recordAll(base, steps.gate, [rate!], steps.details);
          results.recordAll(base, noop.gate, [noop.figure], noop.details);
          results.recordAll(base, gate, [{ metric: 'steps/s ÷ no-op jobs/s', better: 'higher', value: ratio }]);
          results.recordAll(base, steps.gate, costs);
          reportRep(
            `${driver.name} ${setup} ${variant}`,
            rep,
            context,
            gate,
            `${formatNumber(steps.perSecond)} steps/s, ${formatNumber(noop.figure.value)} no-op jobs/s (${formatNumber(ratio)}×), ` +
              `${formatNumber(steps.statementsPerStep)} statements per step`,
            reps.length,
          );
        }
      }
    }
  }
  return {
    id: 'steps',
    title: '(s) Durable steps',
    method: [
      `skiplock only: pg-boss and graphile-worker have no durable steps. ${scale.stepsJobs.toLocaleString('en-US')} jobs are loaded ` +
        'once through the batch API and analyzed, and every repetition starts from a fresh copy of that database, as in (b). ' +
        `In each repetition the Node worker (the setups of (b), \`concurrency + 2\` connections) drains them twice: once as plain ` +
        `no-op jobs (a burn-down, as (b)), then with a handler that makes ${STEPS_PER_JOB} no-op \`ctx.step.do\` calls, one after ` +
        "another, each recorded (fenced by the job's lease token, its lease extended in the same statement once half of it is spent) before it answers. " +
        'Steps per second run from the first step recorded to the last; no-op jobs per second from the first handler start to ' +
        'the last. Their ratio is taken within each repetition.',
      'A job runs its steps one at a time, so the steps waiting for their record at any moment are at most the concurrency: the ' +
        "drain's group commit sends what waits in one statement, one statement out at a time. The concurrencies are (b)'s, and " +
        '128 (beyond them: a tuned setting for jobs that are mostly steps).',
      "Statements per step: the calls of the step path's statements (`skiplock.record_steps`, and the load of a job's recorded " +
        'steps at its first step), read from pg_stat_statements, over the steps recorded; the rest of the drain (claims, ' +
        'completions) is counted per job in (g). CPU µs per step: as in (b), over the steps recorded between the first and the last.',
      `The gate: every job ran once and succeeded in one attempt, each step's function ran exactly once, and the ` +
        `${STEPS_PER_JOB} steps of every job that ran are recorded. A run stops after ${scale.stepsCapSeconds} s of work at most ` +
        `(flagged). ${reps.length} repetitions; each cell shows the median and the spread (min–max).`,
    ],
    parameters: {
      jobs: scale.stepsJobs,
      stepsPerJob: STEPS_PER_JOB,
      capSeconds: scale.stepsCapSeconds,
      repetitions: reps.length,
      concurrencies: [...STEPS_CONCURRENCIES],
    },
    measurements: results.measurements,
  };
};

/** The steps workload's backlog: plain jobs, drained as no-op jobs or with steps, whichever handler the worker has. */
function stepsBacklog(context: WorkloadContext, driver: SystemDriver): Promise<Backlog> {
  return preloadedBacklog(context, driver, 'steps', (system, ledger) =>
    preload(system, ledger, context.options.scale.stepsJobs),
  );
}

/** A burn-down of the backlog as no-op jobs: jobs per second, first start to last. */
async function noopRun(
  context: WorkloadContext,
  driver: SystemDriver,
  setup: SetupName,
  concurrency: number,
  backlog: Backlog,
): Promise<{ gate: GateResult; figure: Figure; details: { ran: number; finished: boolean } }> {
  const { scale } = context.options;
  return withSystem(
    context,
    driver,
    setup,
    'steps_noop',
    async (system) => {
      const ledger = JobLedger.fromBacklog(backlog.jobs);
      const workers = await system.startWorkers({ concurrency, handler: ledger.handler });
      await ledger.whenStarted(1, FIRST_JOB_WAIT_MS);
      const finished = await ledger.whenStarted(backlog.jobs, scale.stepsCapSeconds * 1000);
      const ran = ledger.started;
      const gate = await stopAndGate(workers, system, ledger);
      const flag = finished ? undefined : `capped at ${scale.stepsCapSeconds} s`;
      const figure: Figure = {
        metric: 'no-op jobs/s',
        better: 'higher',
        value: ledger.startRate(),
        ...(flag === undefined ? {} : { flag }),
      };
      return { gate, figure, details: { ran, finished } };
    },
    backlog,
  );
}

/** Counts each step's runs and when each step answered (recorded). */
class StepLedger {
  recorded = 0;
  private readonly runs = new Map<string, number>();
  private firstAt = Number.NaN;
  private lastAt = Number.NaN;
  private waiter: { target: number; wake: () => void } | undefined;

  constructor(private readonly jobs: JobLedger) {}

  readonly handler: StepsHandler = async (payload, step) => {
    await this.jobs.handler(payload);
    for (let i = 1; i <= STEPS_PER_JOB; i++) {
      const key = `${payload.n}/${i}`;
      await step.do(`step ${i}`, () => {
        this.runs.set(key, (this.runs.get(key) ?? 0) + 1);
      });
      const at = performance.now();
      if (this.recorded === 0) this.firstAt = at;
      this.lastAt = at;
      this.recorded += 1;
      if (this.waiter !== undefined && this.recorded >= this.waiter.target) this.waiter.wake();
    }
  };

  /** Resolves true once `target` steps were recorded, false if `timeoutMs` passes first. */
  whenRecorded(target: number, timeoutMs: number): Promise<boolean> {
    if (this.recorded >= target) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiter = undefined;
        resolve(this.recorded >= target);
      }, timeoutMs);
      this.waiter = {
        target,
        wake: () => {
          clearTimeout(timer);
          this.waiter = undefined;
          resolve(true);
        },
      };
    });
  }

  /** Steps per second from the first step recorded to the last. */
  get perSecond(): number {
    const span = this.lastAt - this.firstAt;
    return span > 0 ? ((this.recorded - 1) * 1000) / span : Number.NaN;
  }

  /** Step functions run more than once, and steps that ran without answering (not recorded). */
  problems(recordedInDatabase: number): string[] {
    const calls = [...this.runs.values()];
    const twice = calls.filter((count) => count > 1).length;
    const ranJobs = this.jobs.started;
    return [
      ...(twice > 0 ? [`${twice} step functions ran more than once`] : []),
      ...(this.runs.size !== this.recorded ? [`${this.runs.size} steps ran but ${this.recorded} answered`] : []),
      ...(recordedInDatabase !== this.recorded
        ? [`${this.recorded} steps answered but ${recordedInDatabase} are recorded`]
        : []),
      ...(this.recorded !== ranJobs * STEPS_PER_JOB
        ? [`${ranJobs} jobs ran but ${this.recorded} steps, not ${ranJobs * STEPS_PER_JOB}`]
        : []),
    ];
  }
}

interface StepsRun {
  gate: GateResult;
  perSecond: number;
  statementsPerStep: number;
  figures: Figure[];
  details: {
    steps: number;
    finished: boolean;
    statementSource: string;
    recordStatements: number;
    loadStatements: number;
    statementsPerJob: number;
  };
}

/** The backlog drained by a handler of STEPS_PER_JOB steps: steps per second, statements per step, CPU per step. */
async function stepsRun(
  context: WorkloadContext,
  driver: SystemDriver,
  setup: SetupName,
  concurrency: number,
  backlog: Backlog,
): Promise<StepsRun> {
  const { scale } = context.options;
  return withSystem(
    context,
    driver,
    setup,
    'steps',
    async (system, db) => {
      const startStepWorkers = system.startStepWorkers;
      if (startStepWorkers === undefined) throw new Error(`${driver.name} has no durable steps`);
      const jobs = JobLedger.fromBacklog(backlog.jobs);
      const steps = new StepLedger(jobs);
      const statements = statementCounter(db);
      await statements.reset();
      const workers = await startStepWorkers({ concurrency, handler: steps.handler });
      await steps.whenRecorded(1, FIRST_JOB_WAIT_MS);
      const [cpuBefore, recordedBefore] = [await context.cpu?.read(), steps.recorded];
      const target = backlog.jobs * STEPS_PER_JOB;
      const finished = await steps.whenRecorded(target, scale.stepsCapSeconds * 1000);
      const cpuAfter = await context.cpu?.read();
      const cpuFigures = cpuPerStep(cpuBefore, cpuAfter, steps.recorded - recordedBefore);
      const checked = await stopAndGate(workers, system, jobs);
      const counts = await statements.read();
      const recordStatements = calls(counts, (query) => query.includes(RECORD_STATEMENT));
      const loadStatements = calls(counts, isLoadStatement);
      const recordedInDatabase = await recordedSteps(system, db);
      const problems = [...checked.problems, ...steps.problems(recordedInDatabase)];
      const gate = { ...checked, passed: problems.length === 0, problems };
      const statementsPerStep = (recordStatements + loadStatements) / recordedInDatabase;
      const flag = finished ? undefined : `capped at ${scale.stepsCapSeconds} s`;
      const perSecond = steps.perSecond;
      return {
        gate,
        perSecond,
        statementsPerStep,
        figures: [
          { metric: 'steps/s', better: 'higher', value: perSecond, ...(flag === undefined ? {} : { flag }) },
          { metric: 'statements per step', better: 'lower', value: statementsPerStep },
          ...cpuFigures,
        ],
        details: {
          steps: recordedInDatabase,
          finished,
          statementSource: statements.source,
          recordStatements,
          loadStatements,
          statementsPerJob: ((recordStatements + loadStatements) / recordedInDatabase) * STEPS_PER_JOB,
        },
      };
    },
    backlog,
  );
}

function calls(counts: readonly StatementCount[], matches: (query: string) => boolean): number {
  return counts.filter((count) => matches(count.query)).reduce((sum, count) => sum + count.calls, 0);
}

/** The steps recorded in the database, of any job (the bench queue is the only one). */
async function recordedSteps(system: QueueSystem, db: BenchDatabase): Promise<number> {
  const { rows } = await db.probe.query<{ count: number }>(
    `/* bench-probe */ SELECT count(*)::int AS count FROM ${system.schema}.job_steps WHERE done AND kind = 'do'`,
  );
  return rows[0]!.count;
}

/** CPU microseconds per step recorded between two readings: the server's and this process's (the worker runs in it). */
function cpuPerStep(before: CpuReading | undefined, after: CpuReading | undefined, steps: number): Figure[] {
  if (before === undefined || after === undefined || steps <= 0) return [];
  return [
    {
      metric: 'database CPU µs per step',
      better: 'lower',
      value: ((after.postgresMs - before.postgresMs) * 1000) / steps,
    },
    { metric: 'worker CPU µs per step', better: 'lower', value: ((after.processMs - before.processMs) * 1000) / steps },
  ];
}
