import { describe, expect, it } from 'vitest';
import { QueueDeliveries } from '../drain/index.js';
import { readWorkerConfig } from './config.js';
import { startWorker } from './start-worker.js';

const DATABASE_URL = 'postgres://queue@127.0.0.1:1/queue';

describe('readWorkerConfig', () => {
  it('gives the Node worker its defaults', () => {
    const { worker, jobs } = readWorkerConfig({ DATABASE_URL });
    expect(worker).toMatchObject({
      databaseUrl: DATABASE_URL,
      concurrency: 10,
      claimBatchSize: 10,
      pollIntervalMs: 1000,
      listen: true,
      preparedStatements: true,
      shutdownGraceMs: 20_000,
      retentionSeconds: 7 * 24 * 3600,
      statsRetentionDays: 365,
      workerId: undefined,
    });
    expect(worker.deliveries).toBeInstanceOf(QueueDeliveries);
    expect(jobs).toMatchObject({ devMode: false, http: { allowedHosts: [] } });
  });

  it('reads its variables: the claim batch follows the concurrency unless set, the grace is in seconds', () => {
    expect(readWorkerConfig({ DATABASE_URL, WORKER_CONCURRENCY: '4' }).worker).toMatchObject({
      concurrency: 4,
      claimBatchSize: 4,
    });
    expect(readWorkerConfig({ DATABASE_URL, WORKER_CLAIM_BATCH_SIZE: 'auto' }).worker.claimBatchSize).toBe('auto');
    const { worker, jobs } = readWorkerConfig({
      DATABASE_URL,
      WORKER_CONCURRENCY: '4',
      WORKER_CLAIM_BATCH_SIZE: '100',
      WORKER_ID: 'pod-7',
      WORKER_LISTEN: 'off',
      WORKER_DELIVERIES: 'off',
      SHUTDOWN_GRACE_SECONDS: '2.5',
      SKIPLOCK_DEV: '1',
    });
    expect(worker).toMatchObject({
      concurrency: 4,
      claimBatchSize: 100,
      workerId: 'pod-7',
      listen: false,
      shutdownGraceMs: 2500,
    });
    expect(worker.deliveries).toBeUndefined();
    expect(jobs.devMode).toBe(true);
  });

  it.each([
    [{ WORKER_CONCURRENCY: '0' }, 'WORKER_CONCURRENCY must be a whole number from 1 to 1000, not "0"'],
    [
      { WORKER_CLAIM_BATCH_SIZE: '1001' },
      'WORKER_CLAIM_BATCH_SIZE must be a whole number from 1 to 1000, or auto, not "1001"',
    ],
    [{ POLL_INTERVAL_MS: '5' }, 'POLL_INTERVAL_MS must be a number from 10, not "5"'],
    [{ WORKER_LISTEN: 'maybe' }, 'WORKER_LISTEN must be on or off (also 1 or 0, true or false), not "maybe"'],
    [{ SHUTDOWN_GRACE_SECONDS: '-1' }, 'SHUTDOWN_GRACE_SECONDS must be a number from 0, not "-1"'],
    [{ RETENTION_SECONDS: 'a week' }, 'RETENTION_SECONDS must be a number from 0, not "a week"'],
    [{ DATABASE_URL: ' ' }, 'DATABASE_URL is not set: the worker needs the Postgres that holds the queue'],
  ])('refuses %j in one line', (vars, message) => {
    expect(() => readWorkerConfig({ DATABASE_URL, ...vars })).toThrow(new Error(message));
  });
});

describe('startWorker', () => {
  it('checks its options as the variables are, before it connects', async () => {
    await expect(startWorker({ databaseUrl: DATABASE_URL, handlers: [], concurrency: 0 })).rejects.toThrow(
      new Error('concurrency must be a whole number from 1 to 1000, not 0'),
    );
    await expect(startWorker({ databaseUrl: DATABASE_URL, handlers: [], shutdownGraceMs: -1 })).rejects.toThrow(
      new Error('shutdownGraceMs must be a number from 0 (milliseconds), not -1'),
    );
  });
});
