import { BULK_ACTION_WORDS } from './bulk-words.js';

/**
 * One action on every job the list's filter shows (POST /v1/jobs/bulk): the
 * script counts them first (a dry run), asks with the count, then acts. The
 * reschedule delay and the redrive queue show only with their action, and
 * "every job" only when no filter is set.
 */
export function BulkActions() {
  return (
    <form id="bulk-form" class="panel filters" aria-labelledby="bulk-title">
      <h2 id="bulk-title" class="bulk-title">
        Act on the jobs this filter shows: <span id="bulk-scope" />
      </h2>
      <div class="field">
        <label for="bulk-action">Action</label>
        <select id="bulk-action">
          {Object.entries(BULK_ACTION_WORDS).map(([action, words]) => (
            <option value={action}>{words.label}</option>
          ))}
        </select>
      </div>
      <div class="field" id="bulk-delay-field" hidden>
        <label for="bulk-delay">Start in (seconds)</label>
        <input id="bulk-delay" type="number" min="0" step="1" value="3600" />
      </div>
      <div class="field" id="bulk-to-queue-field" hidden>
        <label for="bulk-to-queue">Into queue</label>
        <input id="bulk-to-queue" list="queue-names" placeholder="their own" />
      </div>
      <label id="bulk-all-field" class="check" hidden>
        <input id="bulk-all" type="checkbox" /> Every job: no filter is set
      </label>
      <div class="actions">
        <button type="submit" id="bulk-count">
          Count and act…
        </button>
      </div>
    </form>
  );
}
