import { Cron } from 'croner';
import { fetchFailureReason } from './fetch-failure.js';

/** When to fire the Worker's `scheduled()` handler. */
export interface DrainSchedule {
  /** The Worker's cron expressions; each firing passes one as `controller.cron`. */
  crons: readonly string[];
  /** Fire every cron this often (whole seconds) instead of on its own schedule, for quick local feedback. */
  everySeconds?: number;
}

/** With croner's `interval`, a pattern matching every second fires every `interval` seconds. */
const EVERY_SECOND = '* * * * * *';

export interface ScheduledTrigger {
  /** Stops the timers and abandons a `scheduled()` call still in flight. */
  stop(): void;
}

/**
 * Crons never fire by themselves under `wrangler dev`, so this does it,
 * through the endpoint miniflare serves for that. Unlike `/__scheduled`, it
 * answers with the handler's outcome: 200 `ok`, or 500 `exception` when
 * `scheduled()` threw or is missing. A failure is one line in `log`.
 * Schedules run in UTC, as Cloudflare runs them.
 */
export function startScheduledTrigger(
  workerUrl: string,
  schedule: DrainSchedule,
  log: (line: string) => void,
): ScheduledTrigger {
  const inFlight = new AbortController();
  const draining = new Set<string>();

  async function fire(cron: string): Promise<void> {
    // A drain still running when the next one is due means there is a backlog
    // it is already working on; stacking a second one on top gains nothing.
    if (draining.has(cron)) return;
    draining.add(cron);
    try {
      const url = `${workerUrl}/cdn-cgi/handler/scheduled?cron=${encodeURIComponent(cron)}`;
      const response = await fetch(url, { signal: inFlight.signal });
      const outcome = (await response.text()).trim();
      if (!response.ok) log(`drain (cron "${cron}"): scheduled() answered ${response.status} ${outcome}`);
    } catch (error) {
      if (!inFlight.signal.aborted) log(`drain (cron "${cron}") not fired: ${fetchFailureReason(error)}`);
    } finally {
      draining.delete(cron);
    }
  }

  const { crons, everySeconds } = schedule;
  const jobs = crons.map((cron) =>
    everySeconds === undefined
      ? new Cron(cron, { timezone: 'UTC' }, () => void fire(cron))
      : new Cron(EVERY_SECOND, { interval: everySeconds }, () => void fire(cron)),
  );

  return {
    stop() {
      for (const job of jobs) job.stop();
      inFlight.abort();
    },
  };
}
