import { BULK_SIZE, KEY_COUNT, STANDARD_CONCURRENCY } from '../config';
import { JobLedger, type GateResult } from '../ledger';
import { progress } from '../progress';
import { Results, type Figure } from '../results';
import { formatNumber } from '../stats';
import {
  KEY_RATE_LIMIT,
  SETUPS,
  type BenchPayload,
  type KeyKind,
  type SetupName,
  type SystemDriver,
} from '../systems/types';
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
import { enqueueAll } from './produce';

/** How long workers may take to start their first job before the run counts as stuck. */
const FIRST_JOB_WAIT_MS = 30_000;

/** The runs of a repetition: the same jobs without keys, and with a key of each kind the system keeps. */
type KeyVariant = 'none' | KeyKind;
const VARIANTS: readonly KeyVariant[] = ['none', 'serial', 'rate'];
const VARIANT_NAMES: Record<KeyVariant, string> = {
  none: 'without keys',
  serial: `one at a time per key (${KEY_COUNT.toLocaleString('en-US')} keys)`,
  rate: `a rate key per job (${KEY_COUNT.toLocaleString('en-US')} keys)`,
};
/** The rows the targets read (bench/targets.ts). */
export const KEYS_PLAIN_VARIANT = VARIANT_NAMES.none;
export const KEYED_VARIANT_NAMES = { serial: VARIANT_NAMES.serial, rate: VARIANT_NAMES.rate };
export const KEYS_RATIO_METRIC = 'with keys ÷ without';
const OVERLAP_METRIC = 'starts beside a running job of the same key';

/**
 * Job n's key: one of KEY_COUNT, by a hash of n, so every system gets the
 * same keys in the same order and a key's jobs are spread through the
 * backlog (as customers' jobs are), not in turn: jobs of one key often
 * come close together, so the limit is met, not only stated.
 */
export function keyOf(n: number): string {
  let h = Math.imul(n ^ (n >>> 16), 0x45d9f3b);
  h = Math.imul(h ^ (h >>> 16), 0x45d9f3b);
  return `key-${((h ^ (h >>> 16)) >>> 0) % KEY_COUNT}`;
}

/**
 * (k) Keys: the burn-down of (b) (standard concurrency), of the same jobs
 * without keys and with each job on one of KEY_COUNT keys, in the same
 * repetition, one system's runs back to back (their order turns each
 * repetition), so each repetition gives a ratio of the same moment.
 *
 * "One at a time per key" in each system, as its source (node_modules)
 * keeps it:
 * - skiplock: a concurrency key of limit 1 (an ordering key adds to it a
 *   held key after a failure for good, which neither peer has). At most one
 *   job of a key is past its turn (waiting to start, running, or waiting
 *   out a retry); the others are held where no claim reads them, and turns
 *   go in enqueue order as slots free.
 * - graphile-worker 0.17: a named queue per key (`queueName`). A claim
 *   takes jobs only of queues it can lock, and locks the queue while its job
 *   runs; the queue is freed when the job completes or fails, so a failed
 *   job's retry (moved back by its backoff) runs after the queue's later
 *   jobs: in order only while jobs succeed. Its docs warn against many
 *   queue names ("degrades performance"). With the local queue (tuned) one
 *   fetch locks up to 500 jobs and may take several of one queue, which then
 *   run at once (graphile/worker#621, fixed after 0.17.3 by #622): the
 *   check below catches it.
 * - pg-boss 10: a queue of policy `singleton`, the key as each job's
 *   `singletonKey`. A unique index over the active jobs of a key keeps it at
 *   one; queued jobs are not limited (all are stored: every system runs the
 *   same jobs). A fetch takes the first job of each key among those it read;
 *   a fetch that would start a key already active fails on the index, and
 *   pg-boss returns no jobs from it (its worker then waits out its polling
 *   interval). No order per key is promised.
 *
 * skiplock also runs the jobs with a rate key each (KEY_RATE_LIMIT starts
 * a second per key, never reached here: what is measured is the counting).
 * The handler notes, per key, the jobs running in it (it yields once, so
 * jobs claimed together are in it together); a start beside a running job
 * of its key fails a keyed run's gate. Without keys the same count is shown:
 * it says the check sees what keys prevent.
 */
export const keysWorkload: Workload = async (context) => {
  const { scale } = context.options;
  const results = new Results();
  const reps = repetitions(context);
  for (const setup of SETUPS) {
    progress(
      `(k) keys · ${setup}: ${scale.keysJobs.toLocaleString('en-US')} jobs without keys and over ${KEY_COUNT.toLocaleString('en-US')} keys`,
    );
    for (const rep of reps) {
      for (const driver of context.drivers) {
        const variants = VARIANTS.filter((variant) => variant === 'none' || driver.keyKinds.includes(variant));
        const turn = (rep - 1) % variants.length;
        const runs = new Map<KeyVariant, KeysRun>();
        for (const variant of [...variants.slice(turn), ...variants.slice(0, turn)]) {
          runs.set(variant, await keysRun(context, driver, setup, variant));
        }
        const plain = runs.get('none')!;
        const summary: string[] = [];
        for (const variant of variants) {
          const run = runs.get(variant)!;
          const base = { system: driver.name, setup, variant: VARIANT_NAMES[variant] };
          results.recordAll(base, run.gate, [run.rate], run.details);
          results.recordAll(base, run.gate, [{ metric: OVERLAP_METRIC, better: 'lower', value: run.details.overlaps }]);
          summary.push(`${variant} ${formatNumber(run.rate.value)} jobs/s (${run.details.overlaps} overlaps)`);
          if (variant === 'none') continue;
          const ratio = run.rate.value / plain.rate.value;
          results.recordAll(base, bothGates(plain.gate, run.gate), [
            { metric: KEYS_RATIO_METRIC, better: 'higher', value: ratio },
          ]);
          summary.push(`${variant} ÷ none ${formatNumber(ratio)}×`);
        }
        const gate = [...runs.values()].map((run) => run.gate).reduce(bothGates);
        reportRep(`${driver.name} ${setup}`, rep, context, gate, summary.join(', '));
      }
    }
  }
  return {
    id: 'keys',
    title: '(k) Keys: one job at a time per key, and rate keys',
    method: [
      `${scale.keysJobs.toLocaleString('en-US')} jobs, loaded once per system through its batch API (1,000 per call) and analyzed, ` +
        `three times over: without keys; with each job on one of ${KEY_COUNT.toLocaleString('en-US')} keys of which one job runs at a ` +
        "time; and (skiplock only) with a rate key each. Job n's key comes from a hash of n, the same for every system, so a key's " +
        'jobs are spread through the backlog. Every repetition starts from a fresh copy of the database. One worker process ' +
        `(concurrency ${STANDARD_CONCURRENCY}, the setups of (b)) drains it as in (b): jobs per second from the first handler start ` +
        `to the last, until the backlog is done or ${scale.keysCapSeconds} s have passed (flagged). In each repetition a system's ` +
        'runs follow one another (their order turns each repetition) and the ratio with keys ÷ without is taken within the ' +
        `repetition; ${reps.length} repetitions, each cell the median and the spread (min–max).`,
      "One job at a time per key, in each system's own terms: skiplock, a concurrency key of limit 1 (turns in enqueue order; a job " +
        'keeps its slot while it waits out a retry); graphile-worker, a named queue per key (`queueName`: the queue is locked while ' +
        'its job runs and freed when it completes or fails, so a retry runs after the later jobs); pg-boss, a queue of policy ' +
        '`singleton` with the key as `singletonKey` (a unique index allows one active job per key; a fetch that would start a ' +
        'second one fails and returns no jobs, and the worker waits out its polling interval; no order per key). Every system ' +
        `stores and runs all the jobs. skiplock's rate key allows ${formatNumber(KEY_RATE_LIMIT)} starts a second per key, a limit these ` +
        'runs never reach: the figure is what counting the starts costs.',
      'The check: the handler (the no-op of every workload, which here yields once before it returns, in every run alike, so jobs ' +
        'claimed together run together) counts the jobs of each key running in it; a job that starts beside a running job of its ' +
        'key fails the gate of a run with one-at-a-time keys. The same count without keys shows that the check sees such starts.',
    ],
    parameters: {
      jobs: scale.keysJobs,
      keys: KEY_COUNT,
      capSeconds: scale.keysCapSeconds,
      concurrency: STANDARD_CONCURRENCY,
      repetitions: reps.length,
    },
    measurements: results.measurements,
  };
};

interface KeysRun {
  gate: GateResult;
  rate: Figure;
  details: { ran: number; finished: boolean; overlaps: number; mostAtOnce: number };
}

/** One burn-down of the variant's backlog: jobs per second, and the starts beside a running job of the same key. */
async function keysRun(
  context: WorkloadContext,
  driver: SystemDriver,
  setup: SetupName,
  variant: KeyVariant,
): Promise<KeysRun> {
  const { scale } = context.options;
  const backlog = await keysBacklog(context, driver, variant);
  return withSystem(
    context,
    driver,
    setup,
    `keys_${variant}`,
    async (system) => {
      const ledger = JobLedger.fromBacklog(backlog.jobs);
      const keys = new KeyOverlaps();
      const handler = async (payload: BenchPayload) => {
        const leave = keys.enter(keyOf(payload.n));
        await ledger.handler(payload);
        await new Promise(setImmediate);
        leave();
      };
      const workers = await system.startWorkers({
        concurrency: STANDARD_CONCURRENCY,
        handler,
        serialKeys: variant === 'serial',
      });
      await ledger.whenStarted(1, FIRST_JOB_WAIT_MS);
      const finished = await ledger.whenStarted(backlog.jobs, scale.keysCapSeconds * 1000);
      const ran = ledger.started;
      const ledgerGate = await stopAndGate(workers, system, ledger);
      const gate =
        variant === 'serial' && keys.overlaps > 0
          ? bothGates(ledgerGate, {
              passed: false,
              problems: [`${keys.overlaps} jobs started beside a running job of their key`],
              unrecordedCompletions: 0,
            })
          : ledgerGate;
      const flag = finished ? undefined : `capped at ${scale.keysCapSeconds} s`;
      return {
        gate,
        rate: {
          metric: 'jobs/s',
          better: 'higher',
          value: ledger.startRate(),
          ...(flag === undefined ? {} : { flag }),
        },
        details: { ran, finished, overlaps: keys.overlaps, mostAtOnce: keys.mostAtOnce },
      };
    },
    backlog,
  );
}

/** The jobs of each key running in the handler, and the starts that found one running. */
class KeyOverlaps {
  overlaps = 0;
  /** The most jobs of one key seen running at once. */
  mostAtOnce = 0;
  private readonly running = new Map<string, number>();

  /** Notes a job of `key` starting; returns what notes its end. */
  enter(key: string): () => void {
    const now = (this.running.get(key) ?? 0) + 1;
    if (now > 1) this.overlaps += 1;
    this.mostAtOnce = Math.max(this.mostAtOnce, now);
    this.running.set(key, now);
    return () => {
      const left = this.running.get(key)! - 1;
      if (left === 0) this.running.delete(key);
      else this.running.set(key, left);
    };
  }
}

/** The variant's jobs, numbered from 0, each with its key (none for `none`), through the batch API. */
function keysBacklog(context: WorkloadContext, driver: SystemDriver, variant: KeyVariant): Promise<Backlog> {
  return preloadedBacklog(context, driver, `keys_${variant}`, async (system, ledger) => {
    const jobs = ledger.allocate(context.options.scale.keysJobs);
    const keyed =
      variant === 'none' ? jobs : jobs.map((job) => ({ ...job, key: { kind: variant, name: keyOf(job.n) } }));
    await enqueueAll(system, ledger, keyed, { callers: 4, perCall: BULK_SIZE });
  });
}
