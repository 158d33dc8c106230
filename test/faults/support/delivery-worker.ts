/**
 * A Node worker whose one job type delivers its jobs in bulk to a webhook
 * (defineWebhookDelivery): the bulk-delivery scenario kills it with SIGKILL
 * between a POST and the completions of its jobs.
 * Environment: DATABASE_URL, WORKER_ID, TARGET_URL, TARGET_SECRET.
 */
import { z } from 'zod';
import { defineWebhookDelivery } from '../../../src/drain';
import { startWorker } from '../../../src/node-worker';

export const forward = defineWebhookDelivery('forward', z.object({ n: z.number().int() }), {
  url: process.env.TARGET_URL!,
  secret: process.env.TARGET_SECRET!,
  batchSize: 50,
  backoff: { baseSeconds: 0.2, maxSeconds: 1 },
});

await startWorker({
  databaseUrl: process.env.DATABASE_URL!,
  workerId: process.env.WORKER_ID!,
  handlers: [forward],
  concurrency: 50,
  pollIntervalMs: 100,
  // Reap the leases of a killed worker soon after they lapse.
  housekeepingIntervalMs: 500,
});
