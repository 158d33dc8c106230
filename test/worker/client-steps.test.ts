import { env } from 'cloudflare:workers';
import { describe, expect, it } from 'vitest';
import { createClient, SkiplockApiError, type JobSteps, type SentEvent } from 'skiplock/client';
import { drainOnce } from '../../src/drain/drain-once';
import { demoWorkflowJob, noopJob } from '../../src/drain/handlers/demo';
import { createRegistry } from '../../src/drain/registry';
import { waitFor } from '../support/wait-for';
import { ADMIN_TOKEN, BASE_URL, createKey, uniqueName, workerFetch } from './http/support/api';
import { httpDatabase } from './support/databases';

const quiet = { info() {}, warn() {}, error() {} };

/** The typed client (`skiplock/client`) over the Worker's own fetch, with the admin key unless another is given. */
function clientOf(apiKey: string = ADMIN_TOKEN) {
  return createClient(BASE_URL, { apiKey, fetch: workerFetch });
}

describe('the typed client: sendEvent, enqueueFlow and a job handle’s steps, in workerd', () => {
  it('reads a workflow’s steps while it waits, wakes it with sendEvent, and reads its steps once it ended', async () => {
    // Types of its own, so only this test's drains run them (the database is shared with other files).
    const workflow = { ...demoWorkflowJob, type: uniqueName('client-workflow') };
    const drain = () =>
      drainOnce(httpDatabase(env), createRegistry([workflow]), {
        budgetSeconds: 5,
        concurrency: 5,
        housekeeping: false,
        logger: quiet,
      });
    const client = clientOf();
    const key = uniqueName('order');
    const job = await client.enqueue(workflow, { key, timeoutMs: 600_000 }, { queue: uniqueName('client-steps') });

    const waiting = await waitFor(`job ${job.id} to wait for demo.approved`, async () => {
      await drain();
      const steps: JobSteps = await job.steps();
      return steps.waitingFor.length > 0 && steps;
    });
    expect(waiting).toEqual({
      steps: [expect.objectContaining({ name: 'start', kind: 'do', status: 'done', attempt: 1 })],
      waitingFor: [{ kind: 'event', step: 'approval', event: 'demo.approved', key, timeoutAt: expect.any(String) }],
      links: [],
    });

    // The events scope sends; enqueue alone does not (a problem document, as SkiplockApiError).
    const refused = clientOf(await createKey(['enqueue'])).sendEvent({ event: 'demo.approved', key });
    await expect(refused).rejects.toBeInstanceOf(SkiplockApiError);
    await expect(refused).rejects.toMatchObject({ status: 403, problem: { title: 'Forbidden' } });
    const sender = clientOf(await createKey(['events']));
    const sent: SentEvent = await sender.sendEvent({ event: 'demo.approved', key, payload: { by: 'client' } });
    expect(sent).toEqual({ event: 'demo.approved', key, tenant: 'default', sentAt: expect.any(String), woken: 1 });

    await waitFor(`job ${job.id} to succeed`, async () => {
      await drain();
      return (await job.status()).status === 'succeeded';
    });
    const result = await job.result({ timeoutMs: 10_000 });
    const approved: boolean = result.approved;
    expect(approved).toBe(true);
    expect(result.approval).toEqual({ by: 'client' });
    const ended = await client.job(job.id).steps();
    expect(ended.steps.map((step) => [step.name, step.kind, step.status])).toEqual([
      ['start', 'do', 'done'],
      ['approval', 'event', 'done'],
    ]);
    expect(ended.steps[1]!.result).toEqual({ payload: { by: 'client' }, sentAt: sent.sentAt });
    expect(ended.waitingFor).toEqual([]);
  }, 60_000);

  it('enqueues a flow whose jobs are handles by ref; the dependent waits for its dependency, then runs', async () => {
    const first = { ...noopJob, type: uniqueName('client-flow-first') };
    const second = { ...noopJob, type: uniqueName('client-flow-second') };
    const queue = uniqueName('client-flow');
    const tenant = uniqueName('client-tenant');
    const client = clientOf();

    const flow = await client.enqueueFlow({
      tenant,
      jobs: [
        { ref: 'first', queue, type: first.type, payload: { n: 1 } },
        { ref: 'second', queue, type: second.type, dependsOn: [{ ref: 'first', onFailure: 'fail' }] },
      ],
    });
    expect(flow.jobs).toEqual([
      { ref: 'first', id: expect.any(String), status: 'queued', runAt: expect.any(String) },
      { ref: 'second', id: expect.any(String), status: expect.any(String), runAt: expect.any(String) },
    ]);
    const [firstJob, secondJob] = flow.jobs;
    expect(flow.job('second').id).toBe(secondJob!.id);
    expect(() => flow.job('third')).toThrow('no job with ref "third" in this flow');
    expect(await flow.job('second').status()).toMatchObject({ tenant, status: 'scheduled' });
    expect(await flow.job('second').steps()).toEqual({
      steps: [],
      waitingFor: [{ kind: 'dependency', jobId: firstJob!.id }],
      links: [expect.objectContaining({ kind: 'dependency', jobId: firstJob!.id, type: first.type, status: 'queued' })],
    });

    const drain = () =>
      drainOnce(httpDatabase(env), createRegistry([first, second]), {
        budgetSeconds: 5,
        concurrency: 5,
        housekeeping: false,
        logger: quiet,
      });
    await waitFor(`flow job ${secondJob!.id} to succeed`, async () => {
      await drain();
      return (await flow.job('second').status()).status === 'succeeded';
    });
    expect(await flow.job('second').result()).toEqual({ ok: true });
    expect((await flow.job('first').steps()).links).toEqual([
      expect.objectContaining({ kind: 'dependent', jobId: secondJob!.id, status: 'succeeded' }),
    ]);
  }, 60_000);

  it('throws SkiplockApiError with the problem document for what the API refuses', async () => {
    const client = clientOf();
    const cycle = client.enqueueFlow({
      jobs: [
        { ref: 'a', queue: 'client-cycle', dependsOn: ['b'] },
        { ref: 'b', queue: 'client-cycle', dependsOn: ['a'] },
      ],
    });
    await expect(cycle).rejects.toBeInstanceOf(SkiplockApiError);
    await expect(cycle).rejects.toMatchObject({
      status: 400,
      problem: { detail: expect.stringContaining('a -> b -> a'), errors: [{ path: 'jobs' }] },
    });
    await expect(client.sendEvent({ event: '' })).rejects.toMatchObject({
      status: 400,
      problem: { errors: [{ path: 'event' }] },
    });
    await expect(client.sendEvent({ event: 'client.kept', keepSeconds: 400 * 86_400 })).rejects.toMatchObject({
      status: 400,
      problem: { errors: [{ path: 'keepSeconds' }] },
    });
    await expect(client.job(crypto.randomUUID()).steps()).rejects.toMatchObject({
      status: 404,
      message: expect.stringMatching(/^404 Not found: no job with this id/),
    });
    // A tenant-bound key sends to its own tenant only.
    const bound = clientOf(await createKey(['events'], 'client-bound'));
    expect(await bound.sendEvent({ event: 'client.nobody-waits' })).toMatchObject({ tenant: 'client-bound', woken: 0 });
    await expect(bound.sendEvent({ event: 'client.nobody-waits', tenant: 'other' })).rejects.toMatchObject({
      status: 403,
      problem: { errors: [{ path: 'tenant' }] },
    });
  });
});
