import { createApp } from './http/app.js';
import { httpDatabase, sessionDatabase } from './worker/database.js';
import { fastPathDrain, scheduledDrain } from './worker/drain.js';
import type { Env } from './worker/env.js';

export type { Env } from './worker/env.js';

/** Built once per isolate; each request brings its own env. */
const app = createApp({
  database: httpDatabase,
  sessionDatabase,
  // Run new jobs at once instead of at the next cron tick (FAST_PATH=off turns it off).
  onEnqueued: (ctx, env) => fastPathDrain(env, ctx),
});

export default {
  fetch: (request, env, ctx) => app.fetch(request, env, ctx),

  /** Cron Trigger: housekeeping, then the registered jobs until the queue is empty or the budget ends. */
  async scheduled(controller, env) {
    await scheduledDrain(env, controller.cron);
  },
} satisfies ExportedHandler<Env>;
