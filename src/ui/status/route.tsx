import type { Context } from 'hono';
import { countFailedAuthentication, failedAuthenticationWait } from '../../http/auth/access.js';
import { statusTokenSecret, verifyStatusToken } from '../../http/auth/status-token.js';
import type { AppDeps } from '../../http/context.js';
import { readStatusView } from '../../http/job-reader.js';
import { UuidSchema } from '../../http/schemas/common.js';
import { cspNonce } from '../page-headers.js';
import type { UiEnv } from '../ui-env.js';
import { JobGonePage, LinkInvalidPage, StatusPage } from './pages.js';

/** Whether `token` is the status token of job `id`, signed by this Worker and not expired. */
async function tokenOpensJob(
  deps: AppDeps,
  c: Context<UiEnv>,
  id: string,
  token: string | undefined,
): Promise<boolean> {
  const secret = await statusTokenSecret(deps.settings(c.env));
  if (secret === undefined || token === undefined || !UuidSchema.safeParse(id).success) return false;
  return verifyStatusToken(secret, id, token);
}

/** `GET /status/{id}?token=…[&embed=1]`: the token is checked before the job is read. */
export function statusPage(deps: AppDeps) {
  return async (c: Context<UiEnv, '/status/:id'>) => {
    const id = c.req.param('id');
    const page = { nonce: cspNonce(c), embed: c.req.query('embed') === '1' };
    const wait = failedAuthenticationWait(c);
    if (wait !== undefined) return c.html(<LinkInvalidPage {...page} />, 429, { 'retry-after': String(wait) });
    if (!(await tokenOpensJob(deps, c, id, c.req.query('token')))) {
      await countFailedAuthentication(c, deps);
      return c.html(<LinkInvalidPage {...page} />, 401);
    }
    const job = await readStatusView(deps, c.env, id);
    if (job === undefined) return c.html(<JobGonePage {...page} />, 404);
    return c.html(<StatusPage job={job} {...page} />, 200);
  };
}
