import { createSkiplock } from 'skiplock/worker';

/** The queue clock's Durable Object, bound as SKIPLOCK_CLOCK in wrangler.toml: idle cron ticks run no statement. */
export { SkiplockClock } from 'skiplock/worker';

/**
 * The reference deployment: the built-in `http` job (and the demo jobs under
 * `npm start`), every setting from the Worker's variables and secrets.
 * Your own Worker passes its jobs: `createSkiplock({ jobs, schedules })`.
 */
const skiplock = createSkiplock();
export default skiplock;

/** The helper drains' Durable Object, bound as SKIPLOCK_DRAINER: a drain with a backlog fans out (DRAIN_FANOUT). */
export class SkiplockDrainer extends skiplock.Drainer {}
