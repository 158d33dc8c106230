import { builtInJobs } from '../drain/handlers/built-in.js';
import { errorFields, jsonConsoleLogger as logger } from '../drain/logger.js';
import { readWorkerConfig } from './config.js';
import { startWorker } from './start-worker.js';

/**
 * `npm run work`: a Node worker that runs the built-in jobs (and, with
 * SKIPLOCK_DEV=1, the demo jobs) until SIGTERM or SIGINT, then stops
 * gracefully and exits 0. Settings come from the environment: DATABASE_URL,
 * WORKER_CONCURRENCY, WORKER_CLAIM_BATCH_SIZE, WORKER_ID, POLL_INTERVAL_MS, WORKER_LISTEN, WORKER_PREPARED_STATEMENTS,
 * SHUTDOWN_GRACE_SECONDS, RETENTION_SECONDS, HTTP_ALLOWED_HOSTS,
 * HTTP_SIGNING_SECRET.
 */
async function main(): Promise<void> {
  const config = readWorkerConfig(process.env);
  const handlers = builtInJobs(config.jobs);
  const worker = await startWorker({ ...config.worker, handlers, logger });
  logger.info('worker started', {
    workerId: worker.workerId,
    types: handlers.map((handler) => handler.type),
    concurrency: config.worker.concurrency,
  });
  const stop = (signal: NodeJS.Signals) => {
    // npm and tsx relay the terminal's signal too, so one Ctrl-C can arrive twice: stop once.
    if (stopping) return;
    stopping = true;
    logger.info('stopping: no new claims; running jobs may finish', { signal, graceMs: config.worker.shutdownGraceMs });
    void worker.stop();
  };
  let stopping = false;
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  await worker.done;
  logger.info('worker stopped', { workerId: worker.workerId });
}

main().then(
  // A handler that ignored its abort signal may still hold a timer: do not wait for it.
  () => process.exit(0),
  (error: unknown) => {
    logger.error('worker failed', errorFields(error));
    process.exit(1);
  },
);
