import { waitingWords } from './waiting-words.js';
import type { Child } from 'hono/jsx';
import type { JobStatusView } from '../../http/status-view.js';
import { Document } from '../document.js';
import { STATUS_LABELS } from '../job-status.js';
import { statusScript } from '../page-scripts.generated.js';
import { themeCss } from '../theme.js';
import { statusCss } from './styles.js';

interface PageProps {
  nonce: string;
  /** `?embed=1`: no title line or footer, transparent, for an iframe. */
  embed: boolean;
}

interface StatusDocumentProps extends PageProps {
  /** The followed job; the script reads its id and status from the card. */
  job?: JobStatusView;
  script?: string;
  children: Child;
}

function StatusDocument({ nonce, embed, job, script, children }: StatusDocumentProps) {
  return (
    <Document
      title="Job status"
      nonce={nonce}
      css={themeCss + statusCss}
      script={script}
      bodyClass={embed ? 'embed' : undefined}
    >
      <main class="status-card" id="status-card" data-job-id={job?.id} data-status={job?.status}>
        {children}
      </main>
      {embed ? null : <p class="powered">Status by skiplock</p>}
    </Document>
  );
}

/** A time as the server knows it (UTC); the script shows it in the reader's zone. */
function TimeRow({ name, label, at }: { name: string; label: string; at: string | null }) {
  return (
    <div id={`${name}-row`} hidden={at === null}>
      <dt>{label}</dt>
      <dd>
        <time id={`${name}-at`} datetime={at ?? ''}>
          {at === null ? '' : at.replace('T', ' ').replace(/\.\d+Z$/, ' UTC')}
        </time>
      </dd>
    </div>
  );
}

/**
 * `GET /status/{id}?token=…`: the job's status view (status and times, and
 * its published progress once the script has it), the same the token opens
 * in the API. Nothing else about the job: not its payload, result, error,
 * queue or tenant.
 */
export function StatusPage({ job, nonce, embed }: PageProps & { job: JobStatusView }) {
  return (
    <StatusDocument nonce={nonce} embed={embed} job={job} script={statusScript}>
      {embed ? null : <p class="eyebrow">Job status</p>}
      <h1 aria-live="polite">
        <span id="status-badge" class="badge" data-status={job.status}>
          {STATUS_LABELS[job.status]}
        </span>
      </h1>
      <p id="waiting-row" hidden={job.waitingFor === null}>
        {job.waitingFor === null ? '' : waitingWords(job.waitingFor)}
      </p>
      <div id="progress-row" class="progress" hidden>
        <progress id="progress-bar" max={100} value={0} aria-labelledby="progress-text" />
        <span id="progress-text" />
      </div>
      <dl class="times">
        <TimeRow name="started" label="Started" at={job.startedAt} />
        <TimeRow name="finished" label="Finished" at={job.finishedAt} />
      </dl>
      <p id="live" class="live" role="status" />
    </StatusDocument>
  );
}

/** 401 for a forged, expired or missing token: the same page for each, so it tells nothing. */
export function LinkInvalidPage({ nonce, embed }: PageProps) {
  return (
    <StatusDocument nonce={nonce} embed={embed}>
      <h1>This link has expired or is not valid</h1>
      <p>Ask whoever gave it to you for a new one.</p>
    </StatusDocument>
  );
}

/** 404 for a valid token whose job has since been pruned. */
export function JobGonePage({ nonce, embed }: PageProps) {
  return (
    <StatusDocument nonce={nonce} embed={embed}>
      <h1>This job is no longer available</h1>
      <p>Finished jobs are kept for a while, then removed.</p>
    </StatusDocument>
  );
}
