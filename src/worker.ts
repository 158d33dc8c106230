import { createApp } from './http/app';
import { httpDatabase } from './worker/database';
import type { Env } from './worker/env';

export type { Env } from './worker/env';

export default {
  fetch(request, env, ctx) {
    return createApp({ database: () => httpDatabase(env) }).fetch(request, env, ctx);
  },
} satisfies ExportedHandler<Env>;
