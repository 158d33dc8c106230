import { Hono, type ExecutionContext } from 'hono';
import type { AppEnv } from '../http/context.js';

/** The route the forwarding app's one handler is registered at, under whatever path a host mounts it. */
const EVERY_PATH = '/*';

/**
 * A Hono app that answers with another, loaded on its first request: the
 * API's routes and their schemas load when a request needs them, not with the
 * Worker, while `skiplock.app` is still a Hono app at hand.
 *
 * Called itself (`fetch`, `request`), it is the loaded app. Mounted in a host
 * app (`app.route('/queue', forwarder)`), its one route hands each request
 * under the mount path to the loaded app mounted at that same path, so the
 * routes see the paths they would see mounted themselves (status URLs and the
 * OpenAPI document's server keep the mount path); a path the loaded app has no
 * route for goes on to the host's later routes and its not-found answer, as a
 * mounted app's unmatched paths do.
 */
export function forwardingApp(load: () => Promise<Hono<AppEnv>>): Hono<AppEnv> {
  const forwarder = new Hono<AppEnv>();
  forwarder.fetch = async (request, env, executionCtx) => (await load()).fetch(request, env, executionCtx);

  const unmatched = new WeakSet<Request>();
  /** The loaded app mounted at each path a host mounted the forwarder at, made once per path. */
  const mountedAt = new Map<string, Promise<Hono<AppEnv>>>();
  const mounted = (path: string): Promise<Hono<AppEnv>> => {
    let app = mountedAt.get(path);
    if (app === undefined) {
      app = load().then((loaded) =>
        new Hono<AppEnv>().route(path, loaded).notFound((c) => {
          unmatched.add(c.req.raw);
          return c.body(null, 404);
        }),
      );
      mountedAt.set(path, app);
      // A load that failed is tried again by the next request, not kept for the isolate's life.
      app.catch(() => mountedAt.delete(path));
    }
    return app;
  };

  forwarder.all(EVERY_PATH, async (c, next) => {
    const path = c.req.routePath.slice(0, -EVERY_PATH.length) || '/';
    const response = await (await mounted(path)).fetch(c.req.raw, c.env, executionContextOf(c));
    if (!unmatched.delete(c.req.raw)) return response;
    await next();
  });
  return forwarder;
}

/** The host's execution context, when it has one (`app.request` in a test passes none). */
function executionContextOf(c: { executionCtx: ExecutionContext }): ExecutionContext | undefined {
  try {
    return c.executionCtx;
  } catch {
    return undefined;
  }
}
