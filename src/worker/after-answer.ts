import type { WaitUntil } from '../http/context.js';

/**
 * Runs `work` in the request's `waitUntil`, but from a timer rather than at
 * once: the request's answer goes back first, so background work the answer
 * does not wait for (the fast-path drain, the queue clock's lowering) spends
 * none of the isolate's CPU, and makes none of its subrequests, between the
 * answer's statement and the answer.
 */
export function afterAnswer(ctx: WaitUntil, work: () => Promise<unknown>): void {
  ctx.waitUntil(new Promise((resolve) => setTimeout(resolve, 0)).then(work));
}
