import { successBody, type JobStatus } from '../http/client.js';
import { usageFailure } from './cli-failure.js';
import { operatorCommand } from './operator-command.js';
import { jsonObjectFlag, wholeNumberFlag } from './read-options.js';

const ACTIONS = ['retry', 'cancel', 'reschedule', 'delete', 'redrive'] as const;
type Action = (typeof ACTIONS)[number];

type Totals = { matched: number; changed: number; cancelRequested?: number; batches: number };

/**
 * `skiplock jobs bulk ACTION`: one action over every job matching the flags,
 * request after request (each runs a bounded number of batches and answers a
 * cursor for the rest) until the API says it is done. The API checks the
 * filter and names what is wrong.
 */
export const bulk = operatorCommand({
  usage:
    'skiplock jobs bulk retry|cancel|reschedule|delete|redrive [--queue Q] [--tenant T] [--type T] [--status S[,S]] ' +
    '[--created-after TIME] [--created-before TIME] [--finished-after TIME] [--finished-before TIME] [--id JOB_ID]... ' +
    "[--tag TAG]... [--payload '{...}'] " +
    '[--all] [--dry-run] [--limit N] [--priority N] [--run-at TIME | --delay SECONDS] [--to-queue Q]',
  options: {
    queue: { type: 'string' },
    tenant: { type: 'string' },
    type: { type: 'string' },
    status: { type: 'string' },
    'created-after': { type: 'string' },
    'created-before': { type: 'string' },
    'finished-after': { type: 'string' },
    'finished-before': { type: 'string' },
    id: { type: 'string', multiple: true },
    tag: { type: 'string', multiple: true },
    payload: { type: 'string' },
    all: { type: 'boolean', default: false },
    'dry-run': { type: 'boolean', default: false },
    limit: { type: 'string' },
    priority: { type: 'string' },
    'run-at': { type: 'string' },
    delay: { type: 'string' },
    'to-queue': { type: 'string' },
  },
  positionals: ['ACTION'],
  async run({ values, positionals: [name], connection }) {
    const action = ACTIONS.find((known) => known === name);
    if (action === undefined) throw usageFailure(`ACTION must be one of ${ACTIONS.join(', ')}, not "${name}"`);
    const filter = {
      queue: values.queue,
      tenant: values.tenant,
      type: values.type,
      status: values.status?.split(',') as JobStatus[] | undefined,
      createdAfter: values['created-after'],
      createdBefore: values['created-before'],
      finishedAfter: values['finished-after'],
      finishedBefore: values['finished-before'],
      ids: values.id,
      tags: values.tag,
      payload: values.payload === undefined ? undefined : jsonObjectFlag(values.payload, '--payload'),
    };
    const change = {
      priority: values.priority === undefined ? undefined : Number(values.priority),
      runAt: values['run-at'],
      delaySeconds: values.delay === undefined ? undefined : Number(values.delay),
    };
    const changeGiven = Object.values(change).some((value) => value !== undefined);
    if (changeGiven !== (action === 'reschedule')) {
      throw usageFailure('--priority, --run-at and --delay go with reschedule, which needs one of them');
    }
    if (values['to-queue'] !== undefined && action !== 'redrive') throw usageFailure('--to-queue goes with redrive');
    let limit = values.limit === undefined ? undefined : wholeNumberFlag(values.limit, '--limit');
    const common = { filter, ...(values.all ? { all: true } : {}), dryRun: values['dry-run'] };
    const totals: Totals = { matched: 0, changed: 0, batches: 0 };
    let answer: Awaited<ReturnType<typeof send>> | undefined;
    let cursor: string | undefined;
    const send = () =>
      successBody(
        connection.api.v1.jobs.bulk.$post({
          json: {
            ...common,
            ...body(action, change, values['to-queue']),
            ...(limit === undefined ? {} : { limit }),
            ...(cursor === undefined ? {} : { cursor }),
          },
        }),
      );
    do {
      answer = await send();
      totals.matched += answer.matched;
      totals.changed += answer.changed;
      totals.batches += answer.batches;
      if (answer.cancelRequested !== undefined)
        totals.cancelRequested = (totals.cancelRequested ?? 0) + answer.cancelRequested;
      if (limit !== undefined) limit -= answer.matched;
      cursor = answer.nextCursor ?? undefined;
    } while (cursor !== undefined && (limit === undefined || limit > 0));
    const json = { ...answer, ...totals, nextCursor: null };
    return { json, human: describe(action, json) };
  },
});

function body(action: Action, change: Record<string, number | string | undefined>, toQueue: string | undefined) {
  if (action === 'reschedule') return { action, change };
  if (action === 'redrive') return { action, ...(toQueue === undefined ? {} : { toQueue }) };
  return { action };
}

function describe(action: Action, result: Totals & { dryRun: boolean; byStatus?: Record<string, number> }): string {
  if (result.dryRun) {
    const statuses = Object.entries(result.byStatus ?? {}).map(([status, jobs]) => `${jobs} ${status}`);
    return `${action} would take ${result.matched} job${result.matched === 1 ? '' : 's'}${statuses.length > 0 ? ` (${statuses.join(', ')})` : ''}; nothing changed (dry run)`;
  }
  const requested = result.cancelRequested ? `, ${result.cancelRequested} of them running and asked to stop` : '';
  return `${action}: ${result.changed} of ${result.matched} matching job${result.matched === 1 ? '' : 's'} changed${requested}`;
}
