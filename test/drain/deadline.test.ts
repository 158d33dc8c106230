import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineJob } from '../../src/drain/define-job';
import { AttemptInterruptedError } from '../../src/drain/job-errors';
import { sleep } from '../../src/engine/sleep';
import { enqueue } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';
import { drain, eventKinds, jobById } from './support/drain';

const open = engineDatabases();

describe('the deadline: what runs is stopped and handed back', () => {
  it('stops a job at the deadline, hands it back, and a later drain finishes it from its progress', async () => {
    const { db } = await open('pg');
    const reasons: unknown[] = [];
    const twoPart = defineJob('two-part', z.unknown(), async (_payload, context) => {
      if (context.job.progress !== null) return { finishedFrom: context.job.progress };
      await context.progress({ part: 1 });
      await new Promise((resolve) => context.signal.addEventListener('abort', resolve));
      reasons.push(context.signal.reason);
      return 'never stored';
    });
    const { job } = await enqueue(db, { queue: 'two-part' });

    const first = await drain(db, [twoPart], { budgetSeconds: 10, housekeeping: false, handBackDelaySeconds: 0 });

    expect(reasons[0]).toBeInstanceOf(AttemptInterruptedError);
    expect(reasons[0]).toMatchObject({ why: 'deadline', name: 'AttemptInterruptedError' });
    expect(first).toMatchObject({ claimed: 1, handedBack: 1, succeeded: 0 });
    // It moved forward (saved progress), so being cut off cost no attempt.
    expect(await jobById(db, job.id)).toMatchObject({ status: 'queued', attempts: 0, progress: { part: 1 } });

    const second = await drain(db, [twoPart]);

    expect(second).toMatchObject({ claimed: 1, succeeded: 1 });
    expect(await jobById(db, job.id)).toMatchObject({
      status: 'succeeded',
      attempts: 1,
      result: { finishedFrom: { part: 1 } },
    });
    expect(await eventKinds(db, job.id)).toEqual([
      'enqueued',
      'claimed',
      'lease_extended',
      'released',
      'claimed',
      'completed',
    ]);
  });

  it('does not wait for a handler that ignores the deadline, and counts the attempt when no progress was saved', async () => {
    const { db } = await open('pg');
    const stubborn = defineJob('stubborn', z.unknown(), () => sleep(20_000));
    const { job } = await enqueue(db, { queue: 'stubborn' });

    const counts = await drain(db, [stubborn], { budgetSeconds: 8, housekeeping: false });

    expect(counts).toMatchObject({ handedBack: 1 });
    expect(await jobById(db, job.id)).toMatchObject({ status: 'scheduled', attempts: 1 });
  });
});
