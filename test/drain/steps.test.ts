import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Db } from '../../src/db/types';
import { defineJob, type JobDefinition } from '../../src/drain/define-job';
import { Client } from 'pg';
import {
  cancel,
  claimBatch,
  enqueue,
  enqueueFlow,
  getJobEvents,
  getJobSteps,
  InvalidInputError,
  sendEvent,
  type JobStatus,
} from '../../src/engine';
import { recordSteps } from '../../src/engine/steps';
import { engineDatabases } from '../support/engine-db';
import { waitFor } from '../support/wait-for';
import { drain, jobById } from './support/drain';

const open = engineDatabases();

/** Drains until the job shows `status` (each drain runs what is due now). */
async function drainUntil(db: Db, jobs: readonly JobDefinition[], id: string, status: JobStatus): Promise<void> {
  let seen: JobStatus | undefined;
  await waitFor(
    () => `job ${id} to be ${status} (it is ${seen})`,
    async () => {
      await drain(db, jobs);
      seen = (await jobById(db, id)).status;
      return seen === status;
    },
  );
}

/** Makes waiting jobs due now: a retry's backoff or a step's retry delay, without waiting it out. */
async function dueNow(db: Db, id: string): Promise<void> {
  await db.query({
    text: "UPDATE skiplock.jobs SET run_at = now() WHERE id = $1 AND state <> 'running'",
    params: [id],
  });
}

describe('durable steps', () => {
  it('runs a recorded step once across retries and returns its stored result', async () => {
    const { db } = await open('pg');
    const runs = { charge: 0, email: 0 };
    const job = defineJob(
      'charge-then-email',
      z.object({ amount: z.number() }),
      async ({ amount }, ctx) => {
        const charge = await ctx.step.do('charge', () => {
          runs.charge += 1;
          return { chargeId: `ch_${amount}` };
        });
        await ctx.step.do('email', () => {
          runs.email += 1;
          if (runs.email === 1) throw new Error('mail server down');
        });
        return charge;
      },
      // A long backoff, so the retry waits (status retrying) instead of running again within the drain
      // (the default's full jitter can draw a few milliseconds); dueNow below makes it due.
      { maxAttempts: 3, backoff: { baseSeconds: 600, maxSeconds: 600 } },
    );
    const handle = await enqueue(db, job, { amount: 42 });
    await drain(db, [job]);
    const failedOnce = await jobById(db, handle.id);
    expect(failedOnce.status).toBe('retrying');
    expect(failedOnce.lastError).toMatchObject({ name: 'StepFailedError', step: 'email' });
    await dueNow(db, handle.id);
    await drainUntil(db, [job], handle.id, 'succeeded');
    expect(runs).toEqual({ charge: 1, email: 2 });
    expect((await jobById(db, handle.id)).result).toEqual({ chargeId: 'ch_42' });
    const { steps } = (await getJobSteps(db, handle.id))!;
    expect(steps.map((step) => [step.name, step.kind, step.status, step.attempt])).toEqual([
      ['charge', 'do', 'done', 1],
      ['email', 'do', 'done', 2],
    ]);
  });

  it('retries a step by its own attempts, parked between them, and fails the job for good naming it', async () => {
    const { db } = await open('pg');
    let tries = 0;
    const job = defineJob('flaky-step', z.unknown(), async (_payload, ctx) => {
      await ctx.step.do(
        'call',
        () => {
          tries += 1;
          throw new Error(`try ${tries}`);
        },
        { maxAttempts: 3, backoff: { baseSeconds: 0.01, maxSeconds: 0.01 } },
      );
    });
    const handle = await enqueue(db, job, null);
    await drainUntil(db, [job], handle.id, 'failed');
    expect(tries).toBe(3);
    const failed = await jobById(db, handle.id);
    expect(failed.attempts).toBe(1);
    expect(failed.lastError).toMatchObject({
      name: 'StepFailedError',
      step: 'call',
      message: 'step "call" failed: try 3',
    });
    expect((await getJobEvents(db, handle.id)).filter((event) => event.kind === 'parked')).toHaveLength(2);
  });

  it('refuses a name used twice, a result that is not JSON and a bad duration, failing the job naming the step', async () => {
    const { db } = await open('pg');
    const cases: Array<[string, (ctx: Parameters<JobDefinition['run']>[1]) => Promise<unknown>, RegExp]> = [
      [
        'twice',
        async (ctx) => (await ctx.step.do('a', () => 1)) + (await ctx.step.do('a', () => 2)),
        /step "a": the name is used by another step/,
      ],
      ['bigint', (ctx) => ctx.step.do('big', () => 10n), /step "big": its result is not JSON/],
      ['negative', (ctx) => ctx.step.sleep('nap', -5), /step "nap": duration must be/],
      ['too-long', (ctx) => ctx.step.sleep('nap', '400 days'), /step "nap": duration must be/],
      ['no-event', (ctx) => ctx.step.waitForEvent('wait', { event: '' }), /step "wait": event must be a name/],
    ];
    for (const [type, body, message] of cases) {
      const job = defineJob(`bad-${type}`, z.unknown(), (_payload, ctx) => body(ctx));
      const handle = await enqueue(db, job, null);
      await drain(db, [job]);
      const failed = await jobById(db, handle.id);
      expect(failed.status, type).toBe('failed');
      expect(failed.lastError, type).toMatchObject({
        name: 'InvalidStepError',
        message: expect.stringMatching(message),
      });
    }
  });

  it('records nothing for an attempt whose lease token no longer owns the job', async () => {
    const { db } = await open('pg');
    const { job } = await enqueue(db, { queue: 'fenced' });
    const recorded = await recordSteps(db, [
      { id: job.id, leaseToken: '00000000-0000-4000-8000-000000000000', name: 'a', result: 1, leaseSeconds: 30 },
    ]);
    expect(recorded.size).toBe(0);
    expect((await getJobSteps(db, job.id))!.steps).toEqual([]);
  });
});

describe('sleeps', () => {
  it('parks the job holding nothing and resumes it at the next step, never early', async () => {
    const { db } = await open('pg');
    let before = 0;
    let resumedAt = 0;
    const job = defineJob('napper', z.unknown(), async (_payload, ctx) => {
      await ctx.step.do('before', () => {
        before += 1;
      });
      await ctx.step.sleep('nap', 800);
      resumedAt = Date.now();
      return 'awake';
    });
    const handle = await enqueue(db, job, null);
    const first = await drain(db, [job]);
    expect(first.parked).toBe(1);
    const parked = await jobById(db, handle.id);
    expect(parked.status).toBe('scheduled');
    expect(parked.leaseExpiresAt).toBeNull();
    expect(parked.attempts).toBe(0);
    const until = Date.parse(parked.runAt);
    await drainUntil(db, [job], handle.id, 'succeeded');
    expect(resumedAt).toBeGreaterThanOrEqual(until);
    expect(before).toBe(1);
    const done = await jobById(db, handle.id);
    expect(done).toMatchObject({ result: 'awake', attempts: 1 });
    expect(await getJobEvents(db, handle.id)).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ kind: 'parked', detail: expect.objectContaining({ step: 'nap' }) }),
      ]),
    );
  });

  it('sleeps again until the recorded end when woken before it', async () => {
    const { db } = await open('pg');
    let runs = 0;
    const job = defineJob('long-nap', z.unknown(), async (_payload, ctx) => {
      runs += 1;
      await ctx.step.sleep('nap', '1 hour');
    });
    const handle = await enqueue(db, job, null);
    await drain(db, [job]);
    const until = (await jobById(db, handle.id)).runAt;
    await dueNow(db, handle.id);
    await drain(db, [job]);
    expect(runs).toBe(2);
    expect(await jobById(db, handle.id)).toMatchObject({ status: 'scheduled', runAt: until });
  });
});

describe('waiting for events', () => {
  const approval = defineJob('await-approval', z.object({ order: z.string() }), async ({ order }, ctx) => {
    const event = await ctx.step.waitForEvent<{ by: string }>('approved', {
      event: 'order.approved',
      key: order,
      timeout: '1 hour',
    });
    return event === null ? 'timed out' : `approved by ${event.payload.by}`;
  });

  it('parks until the event with its key is sent, which wakes it once and hands it the payload', async () => {
    const { db } = await open('pg');
    const handle = await enqueue(db, approval, { order: 'o-1' });
    await drain(db, [approval]);
    const waits = (await getJobSteps(db, handle.id))!.waitingFor;
    expect(waits).toEqual([
      expect.objectContaining({ kind: 'event', step: 'approved', event: 'order.approved', key: 'o-1' }),
    ]);
    expect((await sendEvent(db, { event: 'order.approved', key: 'o-2', payload: { by: 'eve' } })).woken).toBe(0);
    expect((await sendEvent(db, { event: 'order.approved', key: 'o-1', payload: { by: 'ann' } })).woken).toBe(1);
    expect((await sendEvent(db, { event: 'order.approved', key: 'o-1', payload: { by: 'bob' } })).woken).toBe(0);
    await drainUntil(db, [approval], handle.id, 'succeeded');
    expect((await jobById(db, handle.id)).result).toBe('approved by ann');
    expect((await getJobSteps(db, handle.id))!.waitingFor).toEqual([]);
  });

  it('takes an event sent after the job was created but before it waited, and not one sent before the job', async () => {
    const { db } = await open('pg');
    await sendEvent(db, { event: 'order.approved', key: 'o-3', payload: { by: 'early' } });
    const late = await enqueue(db, approval, { order: 'o-3' });
    const kept = await enqueue(db, approval, { order: 'o-4' });
    await sendEvent(db, { event: 'order.approved', key: 'o-4', payload: { by: 'kept' } });
    await drain(db, [approval]);
    expect(await jobById(db, kept.id)).toMatchObject({ status: 'succeeded', result: 'approved by kept' });
    expect((await jobById(db, late.id)).status).toBe('scheduled');
  });

  it('keeps events per tenant', async () => {
    const { db } = await open('pg');
    const handle = await enqueue(db, approval, { order: 'o-5' }, { tenant: 'acme' });
    await drain(db, [approval]);
    expect((await sendEvent(db, { event: 'order.approved', key: 'o-5', payload: { by: 'x' } })).woken).toBe(0);
    expect(
      (await sendEvent(db, { event: 'order.approved', key: 'o-5', tenant: 'acme', payload: { by: 'y' } })).woken,
    ).toBe(1);
    await drainUntil(db, [approval], handle.id, 'succeeded');
  });

  it('answers null once the timeout passes', async () => {
    const { db } = await open('pg');
    const impatient = defineJob(
      'impatient',
      z.unknown(),
      async (_payload, ctx) => (await ctx.step.waitForEvent('reply', { event: 'reply', timeout: 300 })) ?? 'no reply',
    );
    const handle = await enqueue(db, impatient, null);
    await drainUntil(db, [impatient], handle.id, 'succeeded');
    expect((await jobById(db, handle.id)).result).toBe('no reply');
  });

  it('refuses an event without a name, and a keep out of range, storing nothing', async () => {
    const { db } = await open('pg');
    await expect(sendEvent(db, { event: '' })).rejects.toThrow(InvalidInputError);
    await expect(sendEvent(db, { event: 'x', keepSeconds: -1 })).rejects.toThrow(/keepSeconds/);
    await expect(db.query({ text: "SELECT skiplock.send_event('')", params: [] })).rejects.toThrow(
      /event: must be a name/,
    );
    const [{ count } = { count: -1 }] = await db.query<{ count: number }>({
      text: 'SELECT count(*)::int AS count FROM skiplock.events',
      params: [],
    });
    expect(count).toBe(0);
  });
});

describe('child jobs and flows', () => {
  const double = defineJob(
    'double',
    z.object({ n: z.number() }),
    ({ n }) => {
      if (n < 0) throw new Error('negative');
      return n * 2;
    },
    { maxAttempts: 1 },
  );
  const parent = defineJob('parent', z.object({ n: z.number() }), async ({ n }, ctx) => {
    const child = await ctx.step.invoke('double', double, { n });
    return child.ok ? { doubled: child.result } : { failed: child.status };
  });

  it("parks the parent until its child ends and hands it the child's result or failure", async () => {
    const { db } = await open('pg');
    const ok = await enqueue(db, parent, { n: 21 });
    const bad = await enqueue(db, parent, { n: -1 });
    await drainUntil(db, [parent, double], ok.id, 'succeeded');
    await drainUntil(db, [parent, double], bad.id, 'succeeded');
    expect((await jobById(db, ok.id)).result).toEqual({ doubled: 42 });
    expect((await jobById(db, bad.id)).result).toEqual({ failed: 'failed' });
    const { links, steps } = (await getJobSteps(db, ok.id))!;
    expect(links).toEqual([
      expect.objectContaining({ kind: 'child', type: 'double', status: 'succeeded', step: 'double' }),
    ]);
    expect(steps).toEqual([expect.objectContaining({ name: 'double', kind: 'invoke', status: 'done' })]);
    const child = links[0]!.jobId;
    expect((await jobById(db, child)).tenant).toBe('default');
    expect((await getJobSteps(db, child))!.links).toEqual([expect.objectContaining({ kind: 'parent', jobId: ok.id })]);
  });

  it('fans out children invoked at once, and resumes the parent once, when all have ended', async () => {
    const { db } = await open('pg');
    const fanOut = defineJob('fan-out', z.object({ count: z.number() }), async ({ count }, ctx) => {
      const ends = await Promise.all(
        Array.from({ length: count }, (_, index) => ctx.step.invoke(`double-${index}`, double, { n: index })),
      );
      return ends.map((end) => (end.ok ? end.result : end.status));
    });
    const handle = await enqueue(db, fanOut, { count: 3 });
    await drainUntil(db, [fanOut, double], handle.id, 'succeeded');
    expect((await jobById(db, handle.id)).result).toEqual([0, 2, 4]);
    const kinds = (await getJobEvents(db, handle.id)).map((event) => event.kind);
    expect(kinds.filter((kind) => kind === 'parked')).toHaveLength(1);
    expect(kinds.filter((kind) => kind === 'resumed')).toHaveLength(1);
  });

  it('resumes the parent when its last two children end at once, in two transactions', async () => {
    const { db, url } = await open('pg');
    const fanOut = defineJob('pair', z.unknown(), async (_payload, ctx) => {
      const ends = await Promise.all([1, 2].map((n) => ctx.step.invoke(`child ${n}`, { queue: 'children' })));
      return ends.map((end) => end.status);
    });
    const handle = await enqueue(db, fanOut, null);
    await drain(db, [fanOut]);
    const children = await claimBatch(db, { max: 2, workerId: 'children', types: ['children'] });
    expect(children).toHaveLength(2);
    const first = new Client({ connectionString: url });
    const second = new Client({ connectionString: url });
    await Promise.all([first.connect(), second.connect()]);
    try {
      const complete = "SELECT skiplock.complete($1, $2, 'null')";
      await first.query('BEGIN');
      await first.query(complete, [children[0]!.id, children[0]!.leaseToken]);
      await second.query('BEGIN');
      // Ends the other child while the first end is not committed: it must wait for it, then see it.
      let secondEnded = false;
      const secondEnd = second.query(complete, [children[1]!.id, children[1]!.leaseToken]).then(() => {
        secondEnded = true;
      });
      await waitFor('the second end to finish, or to wait for the first', async () => {
        if (secondEnded) return true;
        const [row] = await db.query<{ waiting: number }>({
          text: `SELECT count(*)::int AS waiting FROM pg_stat_activity
                 WHERE datname = current_database() AND wait_event_type = 'Lock'`,
          params: [],
        });
        return row!.waiting > 0;
      });
      await first.query('COMMIT');
      await secondEnd;
      await second.query('COMMIT');
    } finally {
      await Promise.all([first.end(), second.end()]);
    }
    expect((await jobById(db, handle.id)).status).toBe('queued');
    await drainUntil(db, [fanOut], handle.id, 'succeeded');
    expect((await jobById(db, handle.id)).result).toEqual(['succeeded', 'succeeded']);
  });

  it('cancels waiting children with their parent', async () => {
    const { db } = await open('pg');
    const handle = await enqueue(db, parent, { n: 1 });
    await drain(db, [parent]);
    const [link] = (await getJobSteps(db, handle.id))!.links;
    expect((await jobById(db, link!.jobId)).status).toBe('queued');
    await cancel(db, handle.id);
    expect(await jobById(db, link!.jobId)).toMatchObject({
      status: 'cancelled',
      lastError: { name: 'ParentCancelledError' },
    });
  });

  it('runs a flow in dependency order, failing a dependent of a failed job unless it runs anyway', async () => {
    const { db } = await open('pg');
    const ended: string[] = [];
    const step = defineJob(
      'flow-step',
      z.object({ name: z.string(), fail: z.boolean().optional() }),
      async ({ name, fail }, ctx) => {
        const dependencies = await ctx.dependencies();
        ended.push(name);
        if (fail) throw new Error(`${name} fails`);
        return {
          name,
          after: dependencies.map(
            (dependency) => `${(dependency.result as { name?: string } | null)?.name ?? dependency.status}`,
          ),
        };
      },
      { maxAttempts: 1 },
    );
    const jobs = await enqueueFlow(db, {
      tenant: 'acme',
      jobs: [
        { ref: 'a', queue: 'flow-step', payload: { name: 'a' } },
        { ref: 'b', queue: 'flow-step', payload: { name: 'b', fail: true }, dependsOn: ['a'] },
        { ref: 'c', queue: 'flow-step', payload: { name: 'c' }, dependsOn: ['a'] },
        { ref: 'd', queue: 'flow-step', payload: { name: 'd' }, dependsOn: ['b', 'c'] },
        { ref: 'e', queue: 'flow-step', payload: { name: 'e' }, dependsOn: [{ ref: 'b', onFailure: 'run' }, 'c'] },
      ],
    });
    expect(jobs.map((job) => job.status)).toEqual(['queued', 'scheduled', 'scheduled', 'scheduled', 'scheduled']);
    const [a, b, c, d, e] = jobs.map((job) => job.id);
    await drainUntil(db, [step], e!, 'succeeded');
    expect(await jobById(db, d!)).toMatchObject({
      status: 'failed',
      lastError: { name: 'DependencyFailedError', dependencyId: b },
    });
    expect((await jobById(db, e!)).result).toEqual({ name: 'e', after: ['failed', 'c'] });
    expect(ended.indexOf('a')).toBeLessThan(ended.indexOf('b'));
    expect(ended.indexOf('c')).toBeLessThan(ended.indexOf('e'));
    expect(ended).not.toContain('d');
    expect((await jobById(db, a!)).tenant).toBe('acme');
    expect((await getJobSteps(db, c!))!.links.map((link) => link.kind).sort()).toEqual([
      'dependency',
      'dependent',
      'dependent',
    ]);
  });

  it('refuses a cycle by naming it, and a dependency on a job not in the flow, storing nothing', async () => {
    const { db } = await open('pg');
    await expect(
      enqueueFlow(db, {
        jobs: [
          { ref: 'a', queue: 'q', dependsOn: ['c'] },
          { ref: 'b', queue: 'q', dependsOn: ['a'] },
          { ref: 'c', queue: 'q', dependsOn: ['b'] },
        ],
      }),
    ).rejects.toThrow('the flow has a cycle: a -> c -> b -> a');
    await expect(enqueueFlow(db, { jobs: [{ ref: 'a', queue: 'q', dependsOn: ['zzz'] }] })).rejects.toMatchObject({
      field: 'jobs.0.dependsOn.0',
      message: expect.stringContaining('"zzz"'),
    });
    const [{ count } = { count: -1 }] = await db.query<{ count: number }>({
      text: 'SELECT count(*)::int AS count FROM skiplock.jobs',
      params: [],
    });
    expect(count).toBe(0);
  });
});
