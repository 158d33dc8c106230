import { runMaintenance } from './drain/maintenance';
import { createApp } from './http/app';
import { httpDatabase } from './worker/database';
import type { Env } from './worker/env';

export type { Env } from './worker/env';

export default {
  fetch(request, env, ctx) {
    return createApp({ database: () => httpDatabase(env) }).fetch(request, env, ctx);
  },

  /** Cron Trigger: housekeeping first; the drain that runs handlers builds on this. */
  async scheduled(controller, env) {
    const counts = await runMaintenance(httpDatabase(env));
    console.log(JSON.stringify({ event: 'maintenance', cron: controller.cron, ...counts }));
  },
} satisfies ExportedHandler<Env>;
