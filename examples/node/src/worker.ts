import { startWorker } from 'skiplock/node-worker';
import { confirmOrder } from './jobs.js';

/** `node build/src/worker.js`: runs this service's jobs until SIGTERM, then stops gracefully. */
const worker = await startWorker({
  databaseUrl: process.env.DATABASE_URL!,
  handlers: [confirmOrder],
  concurrency: 4,
  pollIntervalMs: 200,
});
process.on('SIGTERM', () => void worker.stop());
process.on('SIGINT', () => void worker.stop());
await worker.done;
