import { JobLedger } from '../ledger';
import { progress } from '../progress';
import { latencyFigures, Results } from '../results';
import { SETUPS } from '../systems/types';
import { describeFigures, repetitions, reportRep, sleep, stopAndGate, withSystem, type Workload } from './harness';

/** Pause between samples for a system woken by NOTIFY: its phase does not matter. */
const LISTEN_GAP_MS = 50;
/** Time the workers get to settle (connect, LISTEN, first empty poll) before the first sample. */
const SETTLE_MS = 500;

/**
 * (c) Pickup latency on an idle system: one job at a time, from the enqueue
 * call to its handler's start. A polling system's latency depends on where
 * in its poll cycle the job lands, so the pause before each sample is drawn
 * uniformly from one poll interval: the samples land at random phases, as
 * real traffic does. skiplock runs twice: with LISTEN (the Node worker) and
 * polling only (a worker behind a transaction pooler; on Workers the cron
 * drain is the poll).
 */
export const latencyWorkload: Workload = async (context) => {
  const { scale } = context.options;
  const results = new Results();
  for (const setup of SETUPS) {
    progress(`(c) pickup latency · ${setup}`);
    for (const rep of repetitions(context)) {
      for (const driver of context.drivers) {
        for (const wakeup of driver.wakeups) {
          const variant = `wake-up: ${wakeup}`;
          await withSystem(context, driver, setup, 'latency', async (system) => {
            const ledger = new JobLedger();
            const workers = await system.startWorkers({ concurrency: 1, handler: ledger.handler, wakeup });
            await sleep(SETTLE_MS);
            const gapMs = wakeup === 'poll' ? system.pollIntervalMs : LISTEN_GAP_MS;
            let timedOut = 0;
            /** One job from the enqueue call to its start; counted in timedOut when it does not start in time. */
            const sample = async (started: number) => {
              await sleep(Math.random() * gapMs);
              const [job] = ledger.allocate(1);
              ledger.markEnqueueCall(job!.n);
              await system.enqueue(job!);
              ledger.recordEnqueued(1);
              if (!(await ledger.whenStarted(started, system.pollIntervalMs * 3 + 5000))) timedOut += 1;
            };
            // The first job is the first statement of its kind on each
            // connection (plans, catalog caches): reported on its own, not among the samples.
            await sample(1);
            const endBy = performance.now() + scale.latencyCapSeconds * 1000;
            for (let i = 0; i < scale.latencySamples && performance.now() < endBy; i++) await sample(i + 2);
            const gate = await stopAndGate(workers, system, ledger);
            const [first, ...latencies] = ledger.pickups().map((pickup) => pickup.ms);
            const figures = [
              ...latencyFigures(latencies),
              { metric: 'first job ms', better: 'lower' as const, value: first ?? Number.NaN },
            ];
            results.recordAll({ system: driver.name, setup, variant }, gate, figures, {
              samples: latencies.length,
              timedOut,
              latenciesMs: latencies.map((ms) => Math.round(ms * 100) / 100),
            });
            reportRep(
              `${driver.name} ${setup} ${variant}`,
              rep,
              context,
              gate,
              `${describeFigures(figures)} (${latencies.length} samples)`,
            );
          });
        }
      }
    }
  }
  return {
    id: 'latency',
    title: '(c) Pickup latency, idle system',
    method: [
      'One worker (concurrency 1) waits on an empty queue. A job is enqueued, and the next only once its handler has started; ' +
        'latency runs from the enqueue call to the handler start, in the same process (performance.now()).',
      'The first job after the workers start is the first enqueue and claim on their connections (statements planned, catalog caches filled): ' +
        'its latency is reported on its own ("first job ms"), and the samples start with the second.',
      `Before each sample the harness pauses for a random time: up to one poll interval for polling setups, so jobs land at random ` +
        `points of the poll cycle, and up to ${LISTEN_GAP_MS} ms for setups woken by LISTEN/NOTIFY. ` +
        `Each repetition takes ${scale.latencySamples} samples or ${scale.latencyCapSeconds} s, whichever comes first.`,
      'pg-boss 10 has no LISTEN; its tuned setup nudges its workers in-process with `notifyWorker()` after each send, ' +
        'which only works when the producer shares the process with the workers (as here).',
    ],
    parameters: { samples: scale.latencySamples, capSeconds: scale.latencyCapSeconds, listenGapMs: LISTEN_GAP_MS },
    measurements: results.measurements,
  };
};
