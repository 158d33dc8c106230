/** One job: what it carries, what became of it, and its history; retry and cancel. */
export function JobView() {
  return (
    <section id="job-view" aria-labelledby="job-title" hidden>
      <p>
        <a href="#/jobs" id="back-to-jobs">
          ← Jobs
        </a>
      </p>
      <div class="job-head">
        <h1 id="job-title" tabindex={-1}>
          Job <code id="job-id" />
        </h1>
        <span id="job-status" class="badge" />
        <div class="actions">
          <button type="button" id="job-retry">
            Retry
          </button>
          <button type="button" id="job-cancel" class="danger">
            Cancel
          </button>
        </div>
      </div>
      <div class="columns">
        <section class="panel" aria-labelledby="job-details-title">
          <h2 id="job-details-title">Details</h2>
          <dl id="job-details" class="details" />
        </section>
        <section class="panel" aria-labelledby="job-history-title">
          <h2 id="job-history-title">History</h2>
          <ol id="job-history" class="timeline" />
        </section>
      </div>
      {[
        { id: 'job-payload', title: 'Payload' },
        { id: 'job-result', title: 'Result' },
        { id: 'job-error', title: 'Last error' },
        { id: 'job-progress', title: 'Progress' },
      ].map((block) => (
        <section class="panel" aria-labelledby={`${block.id}-title`}>
          <h2 id={`${block.id}-title`}>{block.title}</h2>
          <pre id={block.id} class="json" tabindex={0} />
        </section>
      ))}
    </section>
  );
}
