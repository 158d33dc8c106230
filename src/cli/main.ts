#!/usr/bin/env node
import { CONNECTION_USAGE } from './api-connection.js';
import { EXIT, usageFailure } from './cli-failure.js';
import type { Command } from './operator-command.js';
import { runCli } from './run-cli.js';

// Each command's modules load when it runs: a call of one command does not load the others (the
// dev stack, the worker), which keeps a short call short.
const COMMANDS: Record<string, Command> = {
  migrate: {
    run: async (args) => (await import('./migrate.js')).migrateCommand(args),
    summary: 'apply the pending migrations to DATABASE_URL (safe to run twice)',
  },
  work: {
    run: async (args) => (await import('./work.js')).workCommand(args),
    summary: 'run a Node worker for the jobs your modules export: skiplock work ./jobs.js',
  },
  dev: {
    run: async (args) => (await import('./dev.js')).devCommand(args),
    summary:
      "run this folder's Worker locally: Postgres, migrations, wrangler dev, cron drains (--print-config: the lines to run wrangler yourself)",
  },
  jobs: {
    run: async (args) => (await import('./jobs.js')).jobsCommand(args),
    summary:
      'jobs list | get JOB_ID [--wait] | retry JOB_ID | reschedule JOB_ID | cancel JOB_ID | bulk ACTION [filter] [--dry-run]',
  },
  workers: {
    run: async (args) => (await import('./workers.js')).workersCommand(args),
    summary: 'workers release WORKER: hand back the jobs a crashed worker holds',
  },
  queues: {
    run: async (args) => (await import('./queues.js')).queuesCommand(args),
    summary:
      'job counts per queue and status | get QUEUE | set QUEUE [--concurrency N] [--rate-limit C/S] [--weight N]',
  },
  'job-types': {
    run: async (args) => (await import('./job-types.js')).jobTypesCommand(args),
    summary: "job-types list | set TYPE --retention SECONDS|none|default|definition: a job type's retention",
  },
  stats: {
    run: async (args) => (await import('./queues.js')).statsCommand(args),
    summary: 'job counts per queue, tenant and status, and the queue health',
  },
  'concurrency-keys': {
    run: async (args) => (await import('./concurrency-keys.js')).concurrencyKeysCommand(args),
    summary: 'concurrency-keys list [--blocked] | unblock KEY: keys in use, and ordering keys a failed job holds',
  },
  tenants: {
    run: async (args) => (await import('./tenants.js')).tenantsCommand(args),
    summary: 'tenants get TENANT | set TENANT [--concurrency N] [--rate-limit C/S] [--weight N]',
  },
  events: {
    run: async (args) => (await import('./events.js')).eventsCommand(args),
    summary: 'events send EVENT [--key K] [--payload JSON]: resume the jobs waiting for it',
  },
  keys: {
    run: async (args) => (await import('./keys.js')).keysCommand(args),
    summary: 'keys create --name N --scope S | list | revoke KEY_ID',
  },
};

const HELP = [
  'usage: skiplock <command> [options]',
  ...Object.entries(COMMANDS).map(([name, command]) => `  ${name.padEnd(8)} ${command.summary}`),
  '',
  `jobs, workers, queues, job-types, stats, concurrency-keys, tenants, events and keys call a skiplock API: ${CONNECTION_USAGE}.`,
  `Exit codes: ${Object.entries(EXIT)
    .map(([kind, code]) => `${code} ${kind.replace(/[A-Z]/g, (letter) => ` ${letter.toLowerCase()}`)}`)
    .join(', ')}.`,
].join('\n');

const [name, ...args] = process.argv.slice(2);

if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
  console.log(HELP);
} else {
  const command = COMMANDS[name];
  runCli(`skiplock ${name}`, async () => {
    if (command === undefined)
      throw usageFailure(`unknown command; commands: ${Object.keys(COMMANDS).join(', ')} (skiplock help)`);
    await command.run(args);
  });
}
