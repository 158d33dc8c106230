/// <reference types="@cloudflare/vitest-pool-workers/types" />

declare global {
  namespace Cloudflare {
    interface Env {
      ADMIN_TOKEN: string;
    }
    interface GlobalProps {
      mainModule: typeof import('../src/index.js');
    }
  }
}

export {};
