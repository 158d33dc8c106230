import { describe, expect, it } from 'vitest';
import { z } from 'zod';
// Through the package's own name, so a broken "exports" entry fails here
// instead of in a user's install. Node and vitest resolve a package's
// self-reference from its package.json "exports".
import { enqueue } from 'skiplock';
import { defineJob, drainOnce, createRegistry } from 'skiplock/drain';
import { startWorker } from 'skiplock/node-worker';
import * as drainSource from '../../src/drain';
import * as nodeWorkerSource from '../../src/node-worker/start-worker';
import { engineDatabases } from '../support/engine-db';
import { jobById, recordingLogger, untilStatus } from '../drain/support/drain';

const open = engineDatabases();

describe('package exports', () => {
  it('skiplock/drain and skiplock/node-worker are the modules in src/', () => {
    // The same module instances, not copies: errors thrown by one are instances of the other's classes.
    expect(defineJob).toBe(drainSource.defineJob);
    expect(drainOnce).toBe(drainSource.drainOnce);
    expect(startWorker).toBe(nodeWorkerSource.startWorker);
  });

  it('runs a job defined through skiplock/drain, with drainOnce and with startWorker', async () => {
    const { db, url } = await open('pg');
    const double = defineJob('double', z.object({ n: z.number() }), ({ n }) => ({ doubled: n * 2 }));

    const { job: drained } = await enqueue(db, { queue: 'q', type: 'double', payload: { n: 2 } });
    const counts = await drainOnce(db, createRegistry([double]), { budgetSeconds: 10, logger: recordingLogger() });
    expect(counts.succeeded).toBe(1);
    expect(await jobById(db, drained.id)).toMatchObject({ status: 'succeeded', result: { doubled: 4 } });

    const worker = await startWorker({ databaseUrl: url, handlers: [double], logger: recordingLogger() });
    try {
      const { job } = await enqueue(db, { queue: 'q', type: 'double', payload: { n: 21 } });
      await untilStatus(db, job.id, 'succeeded');
      expect(await jobById(db, job.id)).toMatchObject({ result: { doubled: 42 }, attempts: 1 });
    } finally {
      await worker.stop();
    }
  });
});
