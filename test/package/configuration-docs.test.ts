import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { CONFIGURATION_FILE, withTables } from '../../scripts/configuration-docs';
import { SHARED_SETTINGS } from '../../src/drain/settings';
import { NODE_WORKER_SETTINGS } from '../../src/node-worker/settings';
import { WORKER_SETTINGS } from '../../src/worker/settings';

const GROUPS = { shared: SHARED_SETTINGS, worker: WORKER_SETTINGS, 'node-worker': NODE_WORKER_SETTINGS };

describe('the settings and docs/configuration.md', () => {
  it('has the tables the settings make (npm run docs:config rewrites them after a change)', async () => {
    const committed = await readFile(CONFIGURATION_FILE, 'utf8');
    expect(withTables(committed)).toBe(committed);
  });

  it('refuses a document that lost a table, or names one no settings make', () => {
    expect(() => withTables('<!-- table: worker -->\n<!-- end table -->\n')).toThrow(
      /has no place for the table node-worker, shared, bindings/,
    );
    expect(() => withTables('<!-- table: workers -->\n<!-- end table -->\n')).toThrow(/names a table "workers"/);
  });

  it('keeps every variable and option name users have in their configs', () => {
    const names = Object.fromEntries(
      Object.entries(GROUPS).map(([group, settings]) => [
        group,
        Object.entries(settings).map(([option, each]) => `${each.variable} ${option}`),
      ]),
    );
    expect(names).toEqual({
      shared: [
        'DATABASE_URL databaseUrl',
        'SKIPLOCK_DEV devMode',
        'RETENTION_SECONDS retentionSeconds',
        'STATS_RETENTION_DAYS statsRetentionDays',
        'HTTP_ALLOWED_HOSTS httpAllowedHosts',
        'HTTP_SIGNING_SECRET httpSigningSecret',
      ],
      worker: [
        'ADMIN_TOKEN adminToken',
        'STATUS_TOKEN_SECRET statusTokenSecret',
        'CORS_ORIGINS corsOrigins',
        'MAX_BODY_BYTES maxBodyBytes',
        'DRAIN_BUDGET_SECONDS drainBudgetSeconds',
        'DRAIN_CONCURRENCY drainConcurrency',
        'DRAIN_CLAIM_BATCH_SIZE drainClaimBatchSize',
        'FAST_PATH fastPath',
        'FAST_PATH_BUDGET_SECONDS fastPathBudgetSeconds',
        'WORKERS_PLAN workersPlan',
        'SUBREQUEST_LIMIT subrequestLimit',
        'IDLE_RECHECK_SECONDS idleRecheckSeconds',
        'DRAIN_FANOUT drainFanout',
        'LOG_LEVEL logLevel',
      ],
      'node-worker': [
        'WORKER_CONCURRENCY concurrency',
        'WORKER_CLAIM_BATCH_SIZE claimBatchSize',
        'WORKER_ID workerId',
        'POLL_INTERVAL_MS pollIntervalMs',
        'WORKER_LISTEN listen',
        'WORKER_DELIVERIES deliverWebhooks',
        'WORKER_PREPARED_STATEMENTS preparedStatements',
        'SHUTDOWN_GRACE_SECONDS shutdownGraceMs',
      ],
    });
    expect(NODE_WORKER_SETTINGS.deliverWebhooks.option).toBe(false);
  });

  it('gives each setting a default its own kind accepts', () => {
    const refused = Object.values(GROUPS)
      .flatMap((settings) => Object.values(settings))
      .filter((each) => 'default' in each && !each.kind.fromCode.safeParse(each.default).success)
      .map((each) => each.variable);
    expect(refused).toEqual([]);
  });
});
