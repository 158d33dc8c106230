import { Hono } from 'hono';
import type { Db } from '../db/types';

export interface AppDeps {
  /** The database for this request; made per request because Workers forbid sharing I/O across requests. */
  database: () => Db;
}

export function createApp(deps: AppDeps) {
  const app = new Hono();

  app.get('/healthz', async (c) => {
    const started = Date.now();
    try {
      await deps.database().query({ text: 'SELECT 1 AS ok', params: [] });
      return c.json({ status: 'ok', database: { ok: true, latencyMs: Date.now() - started } });
    } catch (error) {
      return c.json(
        {
          type: 'https://skiplock.dev/problems/database-unavailable',
          title: 'Database unavailable',
          status: 503,
          detail: error instanceof Error ? error.message : String(error),
        },
        503,
        { 'content-type': 'application/problem+json' },
      );
    }
  });

  return app;
}
