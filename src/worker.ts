import { createSkiplock } from 'skiplock/worker';

/** The queue clock's Durable Object, bound as SKIPLOCK_CLOCK in wrangler.toml: idle cron ticks run no statement. */
export { SkiplockClock } from 'skiplock/worker';

/**
 * The reference deployment: the built-in `http` job (and the demo jobs under
 * `npm start`), every setting from the Worker's variables and secrets.
 * Your own Worker passes its jobs: `createSkiplock({ jobs, schedules })`.
 */
export default createSkiplock();
