import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineBatchJob } from '../../src/drain/define-batch-job';
import { PermanentError, RetryAfterError } from '../../src/drain/job-errors';
import { enqueueBatch, listJobs } from '../../src/engine';
import { engineDatabases } from '../support/engine-db';
import { drain, jobById } from './support/drain';

const open = engineDatabases();

const Row = z.object({ n: z.number().int() });

describe('batch handlers', () => {
  it('hands the handler many jobs at once and records each outcome: some succeed, some retry, some fail for good', async () => {
    const { db } = await open('pg');
    const batches: number[][] = [];
    const importRows = defineBatchJob(
      'import-rows',
      Row,
      (jobs) => {
        batches.push(jobs.map((job) => job.payload.n));
        return new Map(
          jobs.map(({ id, payload: { n } }) => [
            id,
            n % 10 === 3
              ? { error: new RetryAfterError(600, 'row locked') }
              : n % 10 === 7
                ? { error: new PermanentError('row rejected') }
                : { result: { stored: n } },
          ]),
        );
      },
      { batchSize: 8 },
    );
    const payloads = Array.from({ length: 30 }, (_, n) => ({ n }));
    const handles = await enqueueBatch(db, importRows, payloads);

    const counts = await drain(db, [importRows], { concurrency: 16, claimBatchSize: 32 });

    // Every job went to the handler exactly once, in batches of more than one and at most 8.
    expect(batches.flat().sort((a, b) => a - b)).toEqual(payloads.map(({ n }) => n));
    expect(Math.max(...batches.map((batch) => batch.length))).toBeLessThanOrEqual(8);
    expect(batches.length).toBeLessThan(30);
    expect(counts).toMatchObject({ claimed: 30, succeeded: 24, retrying: 3, failed: 3 });
    for (const [n, handle] of handles.entries()) {
      const job = await jobById(db, handle.id);
      if (n % 10 === 3)
        expect(job).toMatchObject({
          status: 'retrying',
          lastError: { name: 'RetryAfterError', message: 'row locked' },
        });
      else if (n % 10 === 7) expect(job).toMatchObject({ status: 'failed', lastError: { name: 'PermanentError' } });
      else expect(job).toMatchObject({ status: 'succeeded', result: { stored: n } });
    }
  });

  it('fails the jobs of a batch whose answer names a job it was not given, or leaves one out; a bad payload fails alone', async () => {
    const { db } = await open('pg');
    const calls: string[][] = [];
    const careless = defineBatchJob('careless', Row, (jobs) => {
      calls.push(jobs.map((job) => job.id));
      const outcomes: Record<string, { result: number }> = {};
      for (const job of jobs.slice(1)) outcomes[job.id] = { result: job.payload.n };
      if (calls.length === 1) outcomes['01234567-89ab-7def-8123-456789abcdef'] = { result: 0 };
      return outcomes;
    });
    const good = await enqueueBatch(db, careless, [{ n: 1 }, { n: 2 }, { n: 3 }], { backoffBaseSeconds: 600 });
    const bad = await enqueueBatch(db, [{ queue: 'careless', payload: { n: 'four' } }]);

    await drain(db, [careless], { concurrency: 8 });

    expect(calls).toHaveLength(1);
    expect(calls[0]).toHaveLength(3);
    for (const handle of good) {
      expect(await jobById(db, handle.id)).toMatchObject({
        status: 'retrying',
        lastError: {
          name: 'InvalidBatchOutcomeError',
          message:
            'batch job type "careless": outcomes for jobs this batch was not given: 01234567-89ab-7def-8123-456789abcdef',
        },
      });
    }
    expect(await jobById(db, bad[0]!.job.id)).toMatchObject({
      status: 'failed',
      lastError: { name: 'InvalidPayloadError' },
    });

    // The next batch leaves its first job out: that job fails, the others succeed.
    await db.query({ text: `UPDATE skiplock.jobs SET run_at = now() WHERE state = 'retrying'`, params: [] });
    await drain(db, [careless], { concurrency: 8 });
    const page = await listJobs(db, { queue: 'careless' });
    const byStatus: Record<string, number> = {};
    for (const job of page.jobs) byStatus[job.status] = (byStatus[job.status] ?? 0) + 1;
    expect(byStatus).toEqual({ succeeded: 2, retrying: 1, failed: 1 });
    const missing = page.jobs.find((job) => job.status === 'retrying')!;
    expect(missing.lastError).toMatchObject({ message: `batch job type "careless": no outcome for job ${missing.id}` });
  });

  it('refuses a batch size out of range when the job type is defined', () => {
    expect(() => defineBatchJob('x', Row, () => ({}), { batchSize: 0 })).toThrow(
      'batchSize must be a whole number from 1 to 1000',
    );
    expect(() => defineBatchJob('x', Row, () => ({}), { lingerMs: -1 })).toThrow('lingerMs must be 0 or more');
  });
});
