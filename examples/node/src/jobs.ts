import { z } from 'zod';
import { defineJob } from 'skiplock/drain';

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
