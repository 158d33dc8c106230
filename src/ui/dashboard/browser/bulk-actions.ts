import type { BulkActionName } from '../../../engine/bulk-action.js';
import { parsePayloadMatch } from '../../../engine/tags.js';
import { JOB_STATUSES, type JobStatus } from '../../../engine/types.js';
import { byId } from '../../browser/shared.js';
import { STATUS_LABELS } from '../../job-status.js';
import { BULK_ACTION_WORDS } from '../bulk-words.js';
import { api, problemMessage } from './api.js';
import type { BulkActionRequest, BulkActionResult, BulkFilter } from './api-types.js';
import { confirmAction, showNotice } from './notice.js';

/**
 * A bulk action on the jobs the list shows, through POST /v1/jobs/bulk: a
 * dry run counts them, the dialog asks with that count, and the action then
 * runs request after request (each answers a nextCursor for the rest) on at
 * most that many jobs. Who may act, and on which tenant's jobs, is the API's
 * to decide: a key without the operator scope is refused at the count, and a
 * tenant-bound key's filter is its own tenant whatever the list says.
 */

/** The list's filter as the action takes it; null while the list has not shown one (a load failed). */
let shownFilter: { filter: BulkFilter; said: string } | null = null;

function isBulkAction(value: string): value is BulkActionName {
  return Object.hasOwn(BULK_ACTION_WORDS, value);
}

function isJobStatus(value: string): value is JobStatus {
  return JOB_STATUSES.some((status) => status === value);
}

function jobCount(jobs: number): string {
  return jobs === 1 ? '1 job' : `${jobs} jobs`;
}

/** The list's hash parameters as a bulk filter and in words; a payload or status it cannot read is an error. */
function bulkFilterOf(params: URLSearchParams): { filter: BulkFilter; said: string } | { error: string } {
  const filter: BulkFilter = {};
  const said: string[] = [];
  for (const name of ['queue', 'tenant', 'type'] as const) {
    const value = params.get(name);
    if (value) {
      filter[name] = value;
      said.push(`${name} ${value}`);
    }
  }
  const status = params.get('status');
  if (status) {
    if (!isJobStatus(status)) return { error: `the status "${status}" is not one of ${JOB_STATUSES.join(', ')}` };
    filter.status = status;
    said.push(`status ${STATUS_LABELS[status].toLowerCase()}`);
  }
  // One tag, as the list takes it.
  const tag = params.get('tag');
  if (tag) {
    filter.tags = [tag];
    said.push(`tag ${tag}`);
  }
  const payload = params.get('payload');
  if (payload) {
    const match = parsePayloadMatch(payload);
    if (match === undefined) return { error: 'the payload filter is not a JSON object' };
    filter.payload = match;
    said.push(`payload contains ${payload}`);
  }
  return { filter, said: said.length > 0 ? said.join(', ') : 'no filter, every job' };
}

/** The list shows jobs of `params` (null: it is loading them, or failed to); the action follows it. */
export function showBulkScope(params: URLSearchParams | null): void {
  const read = params === null ? null : bulkFilterOf(params);
  shownFilter = read !== null && 'filter' in read ? read : null;
  byId('bulk-scope').textContent = read === null ? '…' : 'error' in read ? `none (${read.error})` : read.said;
  const unfiltered = shownFilter !== null && Object.keys(shownFilter.filter).length === 0;
  byId('bulk-all-field').hidden = !unfiltered;
  if (!unfiltered) byId('bulk-all', HTMLInputElement).checked = false;
}

function chosenAction(): BulkActionName {
  const value = byId('bulk-action', HTMLSelectElement).value;
  return isBulkAction(value) ? value : 'retry';
}

/** The request for `action` on `filter`; an empty filter says `all` (the form has asked for it). */
function requestOf(action: BulkActionName, filter: BulkFilter): BulkActionRequest {
  const scope = Object.keys(filter).length === 0 ? { all: true } : { filter };
  switch (action) {
    case 'reschedule':
      return { action, ...scope, change: { delaySeconds: Number(byId('bulk-delay', HTMLInputElement).value) } };
    case 'redrive': {
      const toQueue = byId('bulk-to-queue', HTMLInputElement).value.trim();
      return { action, ...scope, ...(toQueue ? { toQueue } : {}) };
    }
    default:
      return { action, ...scope };
  }
}

/** What the dialog says the action does, with the delay or the queue the form gave. */
function effectOf(request: BulkActionRequest): string {
  const effect = BULK_ACTION_WORDS[request.action].effect;
  if (request.action === 'reschedule') return `${effect} Delay: ${request.change.delaySeconds} s.`;
  if (request.action === 'redrive' && request.toQueue) return `${effect} They move into queue ${request.toQueue}.`;
  return effect;
}

function byStatusText(byStatus: BulkActionResult['byStatus']): string {
  return Object.entries(byStatus ?? {})
    .filter(([, jobs]) => jobs > 0)
    .map(([status, jobs]) => `${jobs} ${isJobStatus(status) ? STATUS_LABELS[status].toLowerCase() : status}`)
    .join(', ');
}

function bulk(request: BulkActionRequest): Promise<BulkActionResult> {
  return api<BulkActionResult>('/v1/jobs/bulk', { method: 'POST', body: request });
}

/** What became of the confirmed jobs: those changed, those asked to stop, those someone changed first. */
function outcomeText(action: BulkActionName, counted: number, changed: number, cancelRequested: number): string {
  const said = [`${BULK_ACTION_WORDS[action].done} ${jobCount(changed)}.`];
  if (cancelRequested > 0) said.push(`${cancelRequested} of them running, asked to stop at their next heartbeat.`);
  if (changed < counted)
    said.push(`${counted - changed} of the ${counted} counted had changed before the action reached them.`);
  return said.join(' ');
}

async function countAndAct(event: SubmitEvent, refresh: () => void): Promise<void> {
  event.preventDefault();
  const shown = shownFilter;
  if (shown === null) return showNotice('error', 'The list has no filter the action can take: show the jobs first.');
  if (Object.keys(shown.filter).length === 0 && !byId('bulk-all', HTMLInputElement).checked)
    return showNotice('error', 'No filter is set: filter the jobs first, or tick "Every job" to act on all of them.');
  const action = chosenAction();
  const words = BULK_ACTION_WORDS[action];
  const request = requestOf(action, shown.filter);
  let counted: BulkActionResult;
  try {
    counted = await bulk({ ...request, dryRun: true });
  } catch (problem) {
    return showNotice('error', `Refused. ${problemMessage(problem)}`);
  }
  const jobs = counted.matched;
  if (jobs === 0) return showNotice('ok', `0 jobs match: nothing to ${words.verb}.`);
  const question = jobs === 1 ? `1 job matches; ${words.verb} it?` : `${jobs} jobs match; ${words.verb} them?`;
  const text = `Filter: ${shown.said}. Matching now: ${byStatusText(counted.byStatus)}. ${effectOf(request)}`;
  const verb = words.verb[0]!.toUpperCase() + words.verb.slice(1);
  if (!(await confirmAction(question, text, `${verb} ${jobCount(jobs)}`))) return;

  // At most the jobs counted: a job that came to match since is not one the operator saw.
  const totals = { matched: 0, changed: 0, cancelRequested: 0 };
  let cursor: string | null = null;
  try {
    do {
      if (totals.matched > 0) showNotice('ok', `${words.done} ${totals.changed} of ${jobCount(jobs)} so far…`);
      const done: BulkActionResult = await bulk({
        ...request,
        limit: jobs - totals.matched,
        ...(cursor === null ? {} : { cursor }),
      });
      totals.matched += done.matched;
      totals.changed += done.changed;
      totals.cancelRequested += done.cancelRequested ?? 0;
      cursor = done.nextCursor;
    } while (cursor !== null && totals.matched < jobs);
    showNotice('ok', outcomeText(action, jobs, totals.changed, totals.cancelRequested));
  } catch (problem) {
    showNotice('error', `Stopped after ${jobCount(totals.changed)} of ${jobs}. ${problemMessage(problem)}`);
  }
  refresh();
}

function showActionFields(): void {
  const action = chosenAction();
  byId('bulk-delay-field').hidden = action !== 'reschedule';
  byId('bulk-to-queue-field').hidden = action !== 'redrive';
}

/** `refresh` reloads the list once the action is done, so its rows show what changed. */
export function wireBulkActions(refresh: () => void): void {
  byId('bulk-action').addEventListener('change', showActionFields);
  byId('bulk-form').addEventListener('submit', (event) => void countAndAct(event, refresh));
  showActionFields();
}
