import { createExecutionContext, createScheduledController, waitOnExecutionContext } from 'cloudflare:test';
import { env } from 'cloudflare:workers';

/**
 * Runs a Worker's `scheduled()` as the Cron Trigger `cron` would at
 * `scheduledTime`, then waits for the work it handed to `ctx.waitUntil`, so
 * the test sees its effects afterwards. `vars` override the test env's
 * variables (SKIPLOCK_DEV, DRAIN_BUDGET_SECONDS...) and bindings.
 */
export async function runScheduled(
  worker: ExportedHandler<Cloudflare.Env>,
  cron: string,
  scheduledTime = new Date(),
  vars: Partial<Cloudflare.Env> = {},
): Promise<void> {
  if (worker.scheduled === undefined) throw new Error('the Worker has no scheduled() handler');
  const ctx = createExecutionContext();
  // Without the queue clock unless a test binds it: tests enqueue straight into the database, which the clock never hears of.
  await worker.scheduled(
    createScheduledController({ cron, scheduledTime }),
    { ...env, SKIPLOCK_CLOCK: undefined, ...vars },
    ctx,
  );
  await waitOnExecutionContext(ctx);
}
