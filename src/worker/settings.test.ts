import { describe, expect, it } from 'vitest';
import { ConfigurationError, resolveSettings, TUNING_VARIABLES } from './settings.js';

const DEV = { DATABASE_URL: 'postgres://queue@db.example/queue', SKIPLOCK_DEV: '1' };

describe('resolveSettings', () => {
  it('gives a Worker its defaults', () => {
    const settings = resolveSettings({}, DEV, { api: true });
    expect(settings.drain).toEqual({
      budgetSeconds: 25,
      concurrency: 25,
      claimBatchSize: 'auto',
      fastPath: true,
      fastPathBudgetSeconds: 20,
      subrequestLimit: 50,
      idleRecheckSeconds: 3600,
      fanout: 2,
      logBackgroundDrains: false,
    });
    expect(settings.api).toMatchObject({
      devMode: true,
      corsOrigins: [],
      maxBodyBytes: 1024 * 1024,
      logRequests: false,
    });
    expect(settings.jobs).toEqual({
      devMode: true,
      retentionSeconds: 7 * 24 * 3600,
      statsRetentionDays: 365,
      http: { allowedHosts: [] },
    });
    expect(settings.database).toEqual({ kind: 'neon', url: DEV.DATABASE_URL, localProxy: undefined });
  });

  it("takes the plan's subrequest cap and fan-out unless they are set", () => {
    expect(resolveSettings({}, { ...DEV, WORKERS_PLAN: 'paid' }, { api: true }).drain).toMatchObject({
      subrequestLimit: 1000,
      fanout: 8,
    });
    expect(
      resolveSettings({ subrequestLimit: 200 }, { ...DEV, WORKERS_PLAN: 'paid', DRAIN_FANOUT: '3' }, { api: true })
        .drain,
    ).toMatchObject({
      subrequestLimit: 200,
      fanout: 3,
    });
  });

  it('takes options given in code over the variables, as values, not as text read again', () => {
    const env = {
      ...DEV,
      DRAIN_CONCURRENCY: '10',
      WORKERS_PLAN: 'free',
      LOG_LEVEL: 'warn',
      CORS_ORIGINS: 'https://env.example',
    };
    const settings = resolveSettings(
      {
        drainConcurrency: 40,
        workersPlan: 'paid',
        logLevel: 'info',
        corsOrigins: ['https://code.example'],
        httpAllowedHosts: ['acme=hooks.example.com:8443'],
      },
      env,
      { api: true },
    );
    expect(settings.drain).toMatchObject({
      concurrency: 40,
      // Unset, a drain sizes its claims as it runs.
      claimBatchSize: 'auto',
      subrequestLimit: 1000,
      fanout: 8,
      logBackgroundDrains: true,
    });
    expect(settings.api).toMatchObject({ corsOrigins: ['https://code.example'], logRequests: true });
    expect(settings.jobs.http.allowedHosts).toEqual(['acme=hooks.example.com:8443']);
  });

  it('refuses an option it cannot take in one line naming the option, as it refuses a variable', () => {
    const refusal = (run: () => unknown) => {
      try {
        run();
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigurationError);
        return (error as Error).message;
      }
      throw new Error('not refused');
    };
    expect(refusal(() => resolveSettings({ drainConcurrency: 80 }, DEV, { api: true }))).toBe(
      'skiplock: drainConcurrency must be a whole number from 1 to 50, not 80',
    );
    expect(refusal(() => resolveSettings({}, { ...DEV, DRAIN_CONCURRENCY: '80' }, { api: true }))).toBe(
      'skiplock: DRAIN_CONCURRENCY must be a whole number from 1 to 50, not "80"',
    );
    expect(refusal(() => resolveSettings({}, { ...DEV, DRAIN_CLAIM_BATCH_SIZE: '0' }, { api: true }))).toBe(
      'skiplock: DRAIN_CLAIM_BATCH_SIZE must be a whole number from 1 to 1000, or auto, not "0"',
    );
    expect(refusal(() => resolveSettings({ drainClaimBatchSize: 'most' as 'auto' }, DEV, { api: true }))).toBe(
      'skiplock: drainClaimBatchSize must be a whole number from 1 to 1000, or auto, not "most"',
    );
    expect(resolveSettings({}, { ...DEV, DRAIN_CLAIM_BATCH_SIZE: '100' }, { api: true }).drain.claimBatchSize).toBe(
      100,
    );
    expect(resolveSettings({}, { ...DEV, DRAIN_CLAIM_BATCH_SIZE: 'AUTO' }, { api: true }).drain.claimBatchSize).toBe(
      'auto',
    );
    expect(refusal(() => resolveSettings({ httpAllowedHosts: ['hooks.example.com:http'] }, DEV, { api: true }))).toBe(
      'skiplock: httpAllowedHosts must be [tenant=]host[:port] entries, comma-separated, not "hooks.example.com:http"',
    );
    expect(refusal(() => resolveSettings({ devMode: false }, DEV, { api: true }))).toMatch(
      /^skiplock: ADMIN_TOKEN and STATUS_TOKEN_SECRET are not set/,
    );
  });

  it("refuses, naming the fix, a DATABASE_URL Neon's HTTP driver cannot reach, unless a local Neon proxy is set", () => {
    for (const url of [
      'postgres://app:secret@127.0.0.1:5432/app',
      'postgres://app@localhost/app',
      'postgres://app@[::1]:5432/app',
      'postgres://app@db:5432/app',
    ]) {
      expect(() => resolveSettings({}, { ...DEV, DATABASE_URL: url }, { api: true }), url).toThrow(
        /^skiplock: DATABASE_URL points at \S+, which Neon's HTTP driver cannot reach .* bind HYPERDRIVE/,
      );
    }
    const local = { ...DEV, DATABASE_URL: 'postgres://app@127.0.0.1:5432/app', LOCAL_NEON_PROXY: '127.0.0.1:4444/s' };
    expect(resolveSettings({}, local, { api: true }).database).toMatchObject({
      kind: 'neon',
      localProxy: '127.0.0.1:4444/s',
    });
    const neon = { ...DEV, DATABASE_URL: 'postgres://app:pw@ep-cool-name-123456.eu-central-1.aws.neon.tech/app' };
    expect(resolveSettings({}, neon, { api: true }).database).toMatchObject({ kind: 'neon' });
  });

  it('passes the tuning variables on from npm start, never the database, the secrets or dev mode', () => {
    expect(TUNING_VARIABLES).toContain('DRAIN_CONCURRENCY');
    expect(TUNING_VARIABLES).toContain('RETENTION_SECONDS');
    for (const own of ['DATABASE_URL', 'ADMIN_TOKEN', 'STATUS_TOKEN_SECRET', 'SKIPLOCK_DEV', 'HTTP_SIGNING_SECRET']) {
      expect(TUNING_VARIABLES).not.toContain(own);
    }
  });
});
