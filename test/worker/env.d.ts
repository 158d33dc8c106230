/// <reference types="@cloudflare/vitest-pool-workers/types" />
import type { SkiplockEnv } from '../../src/worker/env';

// What `env` and `exports` from `cloudflare:workers` hold in the Worker tests
// (vitest.workers.config.ts sets each of these bindings).
declare global {
  namespace Cloudflare {
    interface Env extends SkiplockEnv {
      DATABASE_URL: string;
      LOCAL_NEON_PROXY: string;
      ADMIN_TOKEN: string;
      STATUS_TOKEN_SECRET: string;
      CORS_ORIGINS: string;
      TEST_HYPERDRIVE: Hyperdrive;
      TEST_AUTH_RATE_LIMITER: RateLimit;
      SKIPLOCK_DRAINER: DurableObjectNamespace;
      TEST_QUEUE: Queue;
      DELIVERY_QUEUE_TEST: Queue;
      QUEUE_SINK: Fetcher;
    }
    interface GlobalProps {
      mainModule: typeof import('../../src/worker');
    }
  }
}
