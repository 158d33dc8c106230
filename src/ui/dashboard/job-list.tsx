import { JOB_STATUSES, TAG_PATTERN } from '../../engine/index.js';
import { STATUS_LABELS } from '../job-status.js';
import { BulkActions } from './bulk-actions.js';
import { ScrollTable } from './panel.js';

/** Jobs, newest first, filtered by queue, tenant, type, tag, payload and status, a page at a time; bulk actions on them. */
export function JobList() {
  return (
    <section id="jobs-view" aria-labelledby="jobs-title" hidden>
      <h1 id="jobs-title" tabindex={-1}>
        Jobs
      </h1>
      <form id="job-filters" class="panel filters">
        <div class="field">
          <label for="filter-queue">Queue</label>
          <input id="filter-queue" name="queue" list="queue-names" />
        </div>
        <div class="field">
          <label for="filter-tenant">Tenant</label>
          <input id="filter-tenant" name="tenant" list="tenant-names" />
        </div>
        <div class="field">
          <label for="filter-type">Type</label>
          <input id="filter-type" name="type" />
        </div>
        <div class="field">
          <label for="filter-tag">Tag</label>
          <input id="filter-tag" name="tag" placeholder="env=prod" pattern={TAG_PATTERN.source} />
        </div>
        <div class="field">
          <label for="filter-status">Status</label>
          <select id="filter-status" name="status">
            <option value="">Any</option>
            {JOB_STATUSES.map((status) => (
              <option value={status}>{STATUS_LABELS[status]}</option>
            ))}
          </select>
        </div>
        <div class="field">
          <label for="filter-payload">Payload contains</label>
          <input id="filter-payload" name="payload" placeholder='{"customer":42}' spellcheck={false} />
        </div>
        <div class="actions">
          <button type="submit">Show</button>
          <button type="reset" class="secondary">
            Clear
          </button>
        </div>
      </form>
      <BulkActions />
      <div class="panel">
        <ScrollTable
          id="jobs-table"
          label="Jobs"
          columns={['Job', 'Status', 'Queue', 'Tenant', 'Type', 'Tags', { numeric: 'Attempts' }, 'Created', 'Finished']}
        />
        <p id="jobs-empty" class="empty muted" hidden>
          No jobs match.
        </p>
        <nav class="pager" aria-label="Pages of jobs">
          <button type="button" id="jobs-newer" class="secondary">
            ← Newer
          </button>
          <button type="button" id="jobs-older" class="secondary">
            Older →
          </button>
        </nav>
      </div>
    </section>
  );
}
