import type { DrainSchedule } from '../scheduled-trigger.js';

/** The wrangler config's cron triggers, on their own schedule or all of them every `everySeconds`. */
export function chooseDrainSchedule(
  crons: readonly string[],
  everySeconds: number | undefined,
  configName: string,
): DrainSchedule {
  if (everySeconds === undefined) return { crons };
  if (crons.length === 0) {
    throw new Error(
      `a drain interval is set but ${configName} has no cron triggers: the Worker has no scheduled drain to fire`,
    );
  }
  return { crons, everySeconds };
}

/** How drains fire, for the banner. */
export function describeDrainSchedule({ crons, everySeconds }: DrainSchedule, configName: string): string {
  if (crons.length === 0) return `never: ${configName} has no cron triggers`;
  const quoted = crons.map((cron) => `"${cron}"`).join(', ');
  if (everySeconds !== undefined) return `every ${everySeconds} s as cron ${quoted}`;
  return `on the ${configName} cron ${quoted}, in UTC (--drain-every n fires every n s)`;
}
