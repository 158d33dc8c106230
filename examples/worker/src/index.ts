import { createSkiplock } from 'skiplock/worker';
import { jobs, schedules } from './jobs.js';

/** The Worker: the HTTP API, dashboard and status pages on fetch; the drain on the cron. */
export default createSkiplock({ jobs, schedules });
