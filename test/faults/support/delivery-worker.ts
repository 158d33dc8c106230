/**
 * A Node worker that delivers jobs in bulk to a webhook two ways: the jobs of
 * its one job type (defineWebhookDelivery, in code), and those of any queue
 * whose delivery target, set in the database, is a webhook (QueueDeliveries,
 * signed with the secret the target names from this environment). The
 * bulk-delivery scenario kills it with SIGKILL between a POST and the
 * completions of its jobs.
 * Environment: DATABASE_URL, WORKER_ID, TARGET_URL, TARGET_SECRET (the code-defined
 * delivery's), DELIVERY_SECRET_TARGET (the one the queue's target names).
 */
import { z } from 'zod';
import { defineWebhookDelivery, QueueDeliveries } from '../../../src/drain';
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
  deliveries: new QueueDeliveries({
    http: { allowedHosts: [new URL(process.env.TARGET_URL!).host] },
    secret: (name) => process.env[name],
  }),
  concurrency: 50,
  pollIntervalMs: 100,
  // Reap the leases of a killed worker soon after they lapse.
  housekeepingIntervalMs: 500,
});
