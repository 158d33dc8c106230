import { sendEvent } from '../../engine/index.js';
import { asKeyHolder } from '../auth/principal.js';
import type { AppDeps } from '../context.js';
import { authorizedRoute, jsonBody, jsonResponse, problemResponses } from '../openapi-responses.js';
import { forbidden } from '../problem.js';
import { SendEventBodySchema, SentEventSchema } from '../schemas/steps.js';
import { router } from '../validation.js';

export function eventRoutes(deps: AppDeps) {
  const sendEventRoute = authorizedRoute(
    deps,
    { scopes: ['events'] },
    {
      method: 'post',
      path: '/v1/events',
      operationId: 'sendEvent',
      tags: ['jobs'],
      summary: 'Send an event to the jobs waiting for it',
      description:
        'Every job of the tenant parked in `ctx.step.waitForEvent` for this event (and key, when its wait named one) ' +
        "gets `{ payload, sentAt }` as the step's result and resumes, each exactly once, in one statement. The event " +
        'is kept for `keepSeconds` (a day by default) for jobs created before it that reach their wait later. ' +
        'Needs the `events` scope (or admin).',
      request: { body: jsonBody(SendEventBodySchema) },
      responses: {
        200: jsonResponse(SentEventSchema, 'The event was sent'),
        ...problemResponses(400, 401, 403, 413, 503),
      },
    },
  );

  return router().openapi(sendEventRoute, async (c) => {
    const body = c.req.valid('json');
    const holder = asKeyHolder(c.var.principal);
    if (holder.tenant !== null && body.tenant !== undefined && body.tenant !== holder.tenant) {
      throw forbidden(`this key sends events only to tenant ${holder.tenant}`, [
        { path: 'tenant', message: `must be ${holder.tenant} (or left out) with this key` },
      ]);
    }
    const sent = await sendEvent(deps.database(c.env), { ...body, tenant: holder.tenant ?? body.tenant ?? 'default' });
    return c.json(sent, 200);
  });
}
