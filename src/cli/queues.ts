import { successBody } from '../http/client.js';
import { JOB_STATUSES } from '../engine/index.js';
import { operatorCommand } from './operator-command.js';
import { queueSettingsCommand } from './queue-settings.js';
import { duration, fields, table } from './table.js';

const FINISHED_NOTE = 'succeeded, failed, cancelled and expired count the last hour';

/** `skiplock queues`: job counts per queue and status, and how long the oldest ready job has waited. */
const listQueues = operatorCommand({
  usage: 'skiplock queues',
  options: {},
  async run({ connection }) {
    const { queues } = await successBody(connection.api.v1.queues.$get());
    if (queues.length === 0) return { json: { queues }, human: 'no queues with jobs' };
    const rows = queues.map((queue) => [
      queue.queue,
      ...JOB_STATUSES.map((status) => String(queue.counts[status])),
      duration(queue.oldestWaitSeconds),
      String(queue.held),
      String(queue.debounced),
      queue.concurrency === null ? '-' : String(queue.concurrency),
      queue.rateLimit === null
        ? '-'
        : `${queue.rateLimit.count}/${queue.rateLimit.perSeconds}s${queue.rateLimit.onExcess === 'drop' ? ' drop' : ''}`,
      String(queue.weight),
      queue.delivery?.target ?? '-',
      queue.pausedAt === null ? '-' : 'paused',
    ]);
    const header = [
      'queue',
      ...JOB_STATUSES,
      'oldest wait',
      'held',
      'debounced',
      'cap',
      'rate',
      'weight',
      'delivery',
      'paused',
    ];
    return { json: { queues }, human: `${table(header, rows)}\n(${FINISHED_NOTE})` };
  },
});

/** `skiplock queues` lists them; `skiplock queues get|set|pause|resume QUEUE` reads or changes one. */
export async function queuesCommand(args: string[]): Promise<void> {
  await (['get', 'set', 'pause', 'resume'].includes(args[0] ?? '') ? queueSettingsCommand(args) : listQueues(args));
}

/** `skiplock stats`: counts per queue, tenant and status, and the queue's health signs. */
export const statsCommand = operatorCommand({
  usage: 'skiplock stats',
  options: {},
  async run({ connection }) {
    const answer = await successBody(connection.api.v1.stats.$get());
    const { stats, health } = answer;
    const rows = stats.map((row) => [
      row.queue,
      row.tenant,
      row.status,
      String(row.count),
      String(row.held),
      String(row.debounced),
      duration(row.oldestWaitSeconds),
    ]);
    const counts =
      stats.length === 0
        ? 'no jobs'
        : `${table(['queue', 'tenant', 'status', 'count', 'held', 'debounced', 'oldest wait'], rows)}\n(${FINISHED_NOTE})`;
    // The database-wide figures are for keys bound to no tenant; a tenant-bound key gets its own only.
    const snapshot =
      health.oldestSnapshotSeconds == null
        ? 'none'
        : `${duration(health.oldestSnapshotSeconds)} (pid ${health.oldestSnapshotPid})`;
    const signs = fields([
      ['oldest waiting job', duration(health.oldestWaitingSeconds)],
      ['expired leases reaped', `${health.expiredLeasesReaped} in the last hour`],
      ...(health.deadTuples === undefined
        ? []
        : ([
            ['oldest open snapshot', snapshot],
            ['dead tuples', health.deadTuples.map((entry) => `${entry.table} ${entry.deadTuples}`).join(', ')],
          ] as const)),
    ]);
    return { json: answer, human: `${counts}\n\n${signs}` };
  },
});
