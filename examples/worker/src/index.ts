import { createSkiplock } from 'skiplock/worker';
import { jobs, schedules } from './jobs.js';

/** The Worker: the HTTP API, dashboard and status pages on fetch; the drain on the cron. */
export default createSkiplock({ jobs, schedules });

/** The queue clock's Durable Object (bound as SKIPLOCK_CLOCK): idle cron ticks run no statement. */
export { SkiplockClock } from 'skiplock/worker';
