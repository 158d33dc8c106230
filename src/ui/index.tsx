import { Hono } from 'hono';
import type { AppDeps } from '../http/context.js';
import { DashboardPage } from './dashboard/page.js';
import { cspNonce, dashboardHeaders, statusPageHeaders } from './page-headers.js';
import { statusPage } from './status/route.js';
import type { UiEnv } from './ui-env.js';

/**
 * The HTML pages, served by the same Worker as the API: the dashboard at
 * `GET /` and a job's public status page at `GET /status/{id}?token=…`.
 */
export function uiRoutes(deps: AppDeps) {
  return new Hono<UiEnv>()
    .get('/', dashboardHeaders, (c) => c.html(<DashboardPage nonce={cspNonce(c)} />))
    .get('/status/:id', statusPageHeaders(deps), statusPage(deps));
}
