import { z } from 'zod';
import { defineBatchJob, defineJob } from 'skiplock/drain';

/** Confirms an order: the job the service enqueues in the same transaction as the order's row. */
export const confirmOrder = defineJob(
  'confirm-order',
  z.object({ orderId: z.number().int(), email: z.email() }),
  async ({ orderId, email }, ctx) => {
    ctx.log.info('confirming order', { orderId });
    return { orderId, confirmedTo: email };
  },
  { maxAttempts: 3 },
);

/**
 * Records order lines in batches: one multi-row statement for many jobs, an
 * outcome per job (a line without a quantity fails alone).
 */
export const recordOrderLines = defineBatchJob(
  'record-order-lines',
  z.object({ orderId: z.number().int(), sku: z.string(), quantity: z.number().int() }),
  async (jobs, ctx) => {
    ctx.log.info('recording order lines', { lines: jobs.length });
    return new Map(
      jobs.map(({ id, payload }) => [
        id,
        payload.quantity > 0
          ? { result: { sku: payload.sku, batchSize: jobs.length } }
          : { error: new Error('no quantity') },
      ]),
    );
  },
  { batchSize: 10, lingerMs: 50 },
);
