/**
 * The benchmark's entry module in front of the reference Worker's bundle
 * (copied beside `worker.js` by workerd-stack.ts): it counts what Cloudflare
 * bills per invocation, so the cost page is computed from counts, not from
 * the configuration. The Worker's requests and cron invocations; each
 * Durable Object class's requests (`fetch`), alarm invocations, and the wall
 * time an object was busy with either (duration is billed while an object
 * is active). The Worker and its Durable Objects share one isolate under
 * workerd, so one set of counters sees them all; `COUNTS_PATH` answers them.
 */
import worker, * as bundle from './worker.js';

const COUNTS_PATH = '/.well-known/skiplock-bench-invocations';

const invocations = { requests: 0, scheduled: 0, objects: {} };

/** `Base` with its `fetch` and `alarm` counted, and the time each object had one of them running. */
function counted(Base, className) {
  const counter = { requests: 0, alarms: 0, activeMs: 0 };
  invocations.objects[className] = counter;
  const busy = new WeakMap();
  const Counted = class extends Base {};
  for (const [method, kind] of [
    ['fetch', 'requests'],
    ['alarm', 'alarms'],
  ]) {
    const original = Base.prototype[method];
    if (typeof original !== 'function') continue;
    Counted.prototype[method] = async function (...args) {
      counter[kind] += 1;
      const state = busy.get(this) ?? { inFlight: 0, since: 0 };
      busy.set(this, state);
      if (state.inFlight++ === 0) state.since = Date.now();
      try {
        return await original.apply(this, args);
      } finally {
        if (--state.inFlight === 0) counter.activeMs += Date.now() - state.since;
      }
    };
  }
  return Counted;
}

export const SkiplockClock = counted(bundle.SkiplockClock, 'SkiplockClock');
export const SkiplockDrainer = counted(bundle.SkiplockDrainer, 'SkiplockDrainer');

export default {
  fetch(request, env, ctx) {
    if (request.url.endsWith(COUNTS_PATH)) return Response.json(invocations);
    invocations.requests += 1;
    return worker.fetch(request, env, ctx);
  },
  scheduled(controller, env, ctx) {
    invocations.scheduled += 1;
    return worker.scheduled(controller, env, ctx);
  },
};
