import { z } from 'zod';
import { defineJob, type JobDefinition } from '../define-job.js';
import { sleep } from '../../engine/sleep.js';

/** `sleep` saves how long it has slept this often, so a job cut off by a deadline continues where it was. */
const SLEEP_PROGRESS_EVERY_MS = 1000;

/** `noop`: succeeds at once with `{ "ok": true }`. The benchmark's job. */
export const noopJob = defineJob('noop', z.unknown(), () => ({ ok: true }));

const sleptSoFar = z.object({ sleptMs: z.number() }).catch({ sleptMs: 0 });

/**
 * `sleep` (payload `{ "ms": n }`): waits n ms while the drain heartbeats its
 * lease, then succeeds. It saves its progress as it goes, so a sleep longer
 * than a drain's budget continues in the next drain instead of starting over.
 */
export const sleepJob = defineJob('sleep', z.object({ ms: z.number().int().min(0) }), async ({ ms }, context) => {
  let slept = Math.min(ms, sleptSoFar.parse(context.job.progress).sleptMs);
  while (slept < ms) {
    const step = Math.min(SLEEP_PROGRESS_EVERY_MS, ms - slept);
    await sleep(step, context.signal);
    context.signal.throwIfAborted();
    slept += step;
    if (slept < ms) await context.progress({ sleptMs: slept });
  }
  return { ok: true, sleptMs: ms };
});

/** `fail` (payload `{ "times": n }`): throws on its first n attempts, then succeeds. */
export const failJob = defineJob('fail', z.object({ times: z.number().int().min(0) }), ({ times }, context) => {
  if (context.attempt <= times) throw new Error(`planned failure ${context.attempt} of ${times}`);
  return { ok: true, attempts: context.attempt };
});

/**
 * `demo-workflow` (payload `{ "key": "k", "sleepMs": n, "timeoutMs": n, "children": n }`):
 * durable steps to try over HTTP with no code. A step, a sleep of sleepMs,
 * a wait for the event `demo.approved` with key `key` (up to timeoutMs, an
 * hour by default; send it with `POST /v1/events`), then `children` noop
 * child jobs invoked at once and gathered.
 */
export const demoWorkflowJob = defineJob(
  'demo-workflow',
  z.object({
    key: z.string().min(1).max(200),
    sleepMs: z.number().int().min(0).max(86_400_000).default(0),
    timeoutMs: z.number().int().min(0).max(86_400_000).default(3_600_000),
    children: z.number().int().min(0).max(10).default(0),
  }),
  async ({ key, sleepMs, timeoutMs, children }, ctx) => {
    const { startedAt } = await ctx.step.do('start', () => ({ startedAt: new Date().toISOString() }));
    if (sleepMs > 0) await ctx.step.sleep('nap', sleepMs);
    const approval = await ctx.step.waitForEvent('approval', { event: 'demo.approved', key, timeout: timeoutMs });
    const ends = await Promise.all(
      Array.from({ length: children }, (_, index) => ctx.step.invoke(`child-${index + 1}`, noopJob, null)),
    );
    return {
      startedAt,
      approved: approval !== null,
      approval: approval?.payload ?? null,
      children: ends.map((end) => end.status),
    };
  },
);

/** Registered only in dev mode (`npm start`, SKIPLOCK_DEV=1); never in a production deploy by default. */
export const demoJobs: readonly JobDefinition[] = [noopJob, sleepJob, failJob, demoWorkflowJob];
