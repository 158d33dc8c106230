import { Cron } from 'croner';
import { setTimeout as sleep } from 'node:timers/promises';
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

/**
 * A path the Worker answers 404 without a statement. Any request through
 * `wrangler dev` sets a stuck one going again (see `startScheduledTrigger`).
 */
export const NUDGE_PATH = '/.well-known/skiplock-local-nudge';

/** The most a firing on `everySeconds` waits past its time, as a share of the period. */
const JITTER_SHARE = 0.1;

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
 *
 * `wrangler dev` forwards requests between two workerd processes over a
 * pooled connection that both ends close after 5 s idle; a request sent
 * just as it closes waits, unanswered, until another request comes through
 * (cloudflare/workers-sdk#14641). Firings exactly 5 s apart hit that window
 * again and again, so firings on `everySeconds` wait a random part of a
 * tenth of the period; and a firing still unanswered when the next is due
 * gets a request that costs the Worker nothing, to set it going.
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
    if (draining.has(cron)) return nudge();
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

  async function nudge(): Promise<void> {
    try {
      await (await fetch(`${workerUrl}${NUDGE_PATH}`, { method: 'HEAD', signal: inFlight.signal })).arrayBuffer();
    } catch {
      // The firing it was for reports its own failure.
    }
  }

  async function fireAfterJitter(cron: string, periodSeconds: number): Promise<void> {
    try {
      await sleep(Math.random() * JITTER_SHARE * periodSeconds * 1000, undefined, { signal: inFlight.signal });
    } catch {
      return; // stopped
    }
    await fire(cron);
  }

  const { crons, everySeconds } = schedule;
  const jobs = crons.map((cron) =>
    everySeconds === undefined
      ? new Cron(cron, { timezone: 'UTC' }, () => void fire(cron))
      : new Cron(EVERY_SECOND, { interval: everySeconds }, () => void fireAfterJitter(cron, everySeconds)),
  );

  return {
    stop() {
      for (const job of jobs) job.stop();
      inFlight.abort();
    },
  };
}
