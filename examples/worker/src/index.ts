import { createSkiplock } from 'skiplock/worker';
import { jobs, schedules } from './jobs.js';

/** The Worker: the HTTP API, dashboard and status pages on fetch; the drain on the cron. */
const skiplock = createSkiplock({ jobs, schedules });
export default skiplock;

/** The helper drains' Durable Object (bound as SKIPLOCK_DRAINER): a drain with a backlog fans out. */
export class SkiplockDrainer extends skiplock.Drainer {}

/** The queue clock's Durable Object (bound as SKIPLOCK_CLOCK): idle cron ticks run no statement. */
export { SkiplockClock } from 'skiplock/worker';
