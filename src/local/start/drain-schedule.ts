import type { DrainSchedule } from '../scheduled-trigger.js';

/** The wrangler.toml cron triggers, on their own schedule or all of them every DRAIN_EVERY_SECONDS. */
export function chooseDrainSchedule(crons: readonly string[], drainEverySeconds: number | undefined): DrainSchedule {
  if (drainEverySeconds === undefined) return { crons };
  if (crons.length === 0) {
    throw new Error(
      'DRAIN_EVERY_SECONDS is set but wrangler.toml has no [triggers] crons: the Worker has no scheduled drain to fire',
    );
  }
  return { crons, everySeconds: drainEverySeconds };
}

/** How drains fire, for the banner. */
export function describeDrainSchedule({ crons, everySeconds }: DrainSchedule): string {
  if (crons.length === 0) return 'never: wrangler.toml has no cron triggers';
  const quoted = crons.map((cron) => `"${cron}"`).join(', ');
  if (everySeconds !== undefined) return `every ${everySeconds} s (DRAIN_EVERY_SECONDS) as cron ${quoted}`;
  return `on the wrangler.toml cron ${quoted}, in UTC (DRAIN_EVERY_SECONDS=n fires every n s)`;
}
