import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { drainOnce } from '../../../src/drain/drain-once';
import { demoWorkflowJob, noopJob } from '../../../src/drain/handlers/demo';
import { createRegistry } from '../../../src/drain/registry';
import { waitFor } from '../../support/wait-for';
import { createKey, postJson, request } from '../http/support/api';
import { httpDatabase } from '../support/databases';
import { jobById, uniqueName } from './support/jobs';

const quiet = { info() {}, warn() {}, error() {} };

describe('durable steps in workerd', () => {
  it('runs the demo workflow: a step, a sleep, a wait for an event sent over HTTP, two children at once', async () => {
    // A type of its own, so only this test's drains run it (the database is shared with other files).
    const workflow = { ...demoWorkflowJob, type: uniqueName('workflow') };
    const registry = createRegistry([workflow, noopJob]);
    const drain = () =>
      drainOnce(httpDatabase(env), registry, { budgetSeconds: 5, concurrency: 5, housekeeping: false, logger: quiet });
    const key = uniqueName('order');
    const enqueued = await postJson(`/v1/queues/${uniqueName('workflows')}/jobs`, {
      type: workflow.type,
      payload: { key, sleepMs: 300, children: 2 },
    });
    const job = (await enqueued.json()) as { id: string; statusUrl: string };
    const statusView = async () =>
      (await (await request(new URL(job.statusUrl).pathname + new URL(job.statusUrl).search)).json()) as Record<
        string,
        unknown
      >;

    const first = await drain();
    expect(first.parked).toBe(1);
    expect((await jobById(job.id)).status).toBe('scheduled');
    // A browser holding the status URL sees that it sleeps, and until when: nothing else.
    expect((await statusView()).waitingFor).toEqual({ for: 'time', until: (await jobById(job.id)).runAt });

    // Past the sleep it parks again, waiting for the event.
    const waiting = await waitFor(`job ${job.id} to wait for demo.approved`, async () => {
      await drain();
      const response = await request(`/v1/jobs/${job.id}/steps`, { apiKey: env.ADMIN_TOKEN! });
      const steps = (await response.json()) as { waitingFor: Array<{ kind: string; event?: string; key?: string }> };
      return steps.waitingFor.find((wait) => wait.kind === 'event') ?? false;
    });
    expect(waiting).toMatchObject({ event: 'demo.approved', key });
    const view = await statusView();
    expect(view.waitingFor).toEqual({ for: 'event', until: expect.any(String) });
    expect(JSON.stringify(view)).not.toContain(key);

    const eventsKey = await createKey(['events']);
    const enqueueOnly = await createKey(['enqueue']);
    const body = { event: 'demo.approved', key, payload: { by: 'ann' } };
    expect((await postJson('/v1/events', body, enqueueOnly)).status).toBe(403);
    const sent = await postJson('/v1/events', body, eventsKey);
    expect(sent.status).toBe(200);
    expect(await sent.json()).toMatchObject({ event: 'demo.approved', key, tenant: 'default', woken: 1 });

    await waitFor(`job ${job.id} to succeed`, async () => {
      await drain();
      return (await jobById(job.id)).status === 'succeeded';
    });
    expect((await jobById(job.id)).result).toMatchObject({
      approved: true,
      approval: { by: 'ann' },
      children: ['succeeded', 'succeeded'],
    });
    const steps = (await (await request(`/v1/jobs/${job.id}/steps`, { apiKey: env.ADMIN_TOKEN! })).json()) as {
      steps: Array<{ name: string; kind: string }>;
      links: Array<{ kind: string; status: string }>;
    };
    expect(steps.steps.map((step) => step.name)).toEqual(['start', 'nap', 'approval', 'child-1', 'child-2']);
    expect(steps.links).toEqual([
      expect.objectContaining({ kind: 'child', status: 'succeeded' }),
      expect.objectContaining({ kind: 'child', status: 'succeeded' }),
    ]);
  }, 60_000);

  it('refuses an event without a name and a flow with a cycle, naming the field', async () => {
    const noName = await postJson('/v1/events', { event: '' });
    expect(noName.status).toBe(400);
    expect(noName.headers.get('content-type')).toContain('application/problem+json');
    const cycle = await postJson('/v1/flows', {
      jobs: [
        { ref: 'a', queue: 'q', dependsOn: ['b'] },
        { ref: 'b', queue: 'q', dependsOn: ['a'] },
      ],
    });
    expect(cycle.status).toBe(400);
    expect(await cycle.json()).toMatchObject({
      detail: expect.stringContaining('a -> b -> a'),
      errors: [{ path: 'jobs' }],
    });
  });
});
