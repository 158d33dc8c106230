/// <reference types="@cloudflare/vitest-pool-workers/types" />
import type { Env as WorkerEnv } from '../../src/worker/env';

// What `env` and `exports` from `cloudflare:workers` hold in the Worker tests.
declare global {
  namespace Cloudflare {
    interface Env extends WorkerEnv {}
    interface GlobalProps {
      mainModule: typeof import('../../src/worker');
    }
  }
}
