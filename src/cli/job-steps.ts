import type { JobSteps } from '../http/client.js';
import { compactJson, fields, shortTime, table } from './table.js';

/** A result wider than this is cut, with `…`: `--json` shows it whole. */
const RESULT_WIDTH = 60;

type Wait = JobSteps['waitingFor'][number];
type Link = JobSteps['links'][number];

/**
 * A job's durable steps as a table, then what it waits for and the jobs it is
 * linked to as label and value lines; empty for a job that has none of them.
 */
export function describeSteps({ steps, waitingFor, links }: JobSteps): string {
  const parts: string[] = [];
  if (steps.length > 0) {
    const rows = steps.map((step) => [
      step.name,
      step.kind,
      step.status === 'done' ? 'done' : `retrying (${step.failedAttempts} failed)`,
      step.attempt === null ? '-' : String(step.attempt),
      shortTime(step.recordedAt),
      short(step.status === 'done' ? step.result : step.lastError),
    ]);
    parts.push(table(['step', 'kind', 'status', 'attempt', 'recorded', 'result'], rows));
  }
  const lines = [
    ...labelled('waiting for', waitingFor.map(describeWait)),
    ...labelled('linked', links.map(describeLink)),
  ];
  if (lines.length > 0) parts.push(fields(lines));
  return parts.join('\n\n');
}

function describeWait(wait: Wait): string {
  switch (wait.kind) {
    case 'event':
      return `event ${wait.event}${wait.key === null ? ' (any key)' : ` (key ${wait.key})`}, times out ${shortTime(wait.timeoutAt)} (step ${wait.step})`;
    case 'sleep':
      return `sleep until ${shortTime(wait.until)} (step ${wait.step})`;
    case 'child':
      return `child job ${wait.jobId} (step ${wait.step})`;
    case 'dependency':
      return `dependency job ${wait.jobId}`;
    default: {
      // A kind of wait this CLI does not know yet (a newer API): its name and what it names.
      const other = wait as { kind: string; step?: string; jobId?: string };
      return [other.kind, other.jobId, other.step === undefined ? undefined : `(step ${other.step})`]
        .filter((part) => part !== undefined)
        .join(' ');
    }
  }
}

function describeLink(link: Link): string {
  const what = [link.type, link.status ?? 'gone'].filter((part) => part !== null).join(' ');
  const step = link.step === null ? '' : `, step ${link.step}`;
  const resolved = link.resolvedAt === null ? '' : `, resolved ${shortTime(link.resolvedAt)}`;
  return `${link.kind} ${link.jobId}: ${what}${step}${resolved}`;
}

/** Label and value pairs where the label shows on the first value only. */
function labelled(label: string, values: string[]): Array<[string, string]> {
  return values.map((value, index) => [index === 0 ? label : '', value]);
}

function short(value: unknown): string {
  const text = compactJson(value);
  return text.length > RESULT_WIDTH ? `${text.slice(0, RESULT_WIDTH - 1)}…` : text;
}
