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
      <section class="panel" aria-labelledby="job-steps-title" id="job-steps-panel" hidden>
        <h2 id="job-steps-title">Steps</h2>
        <p id="job-waiting" />
        <table>
          <thead>
            <tr>
              <th scope="col">Step</th>
              <th scope="col">Kind</th>
              <th scope="col">Status</th>
              <th scope="col">Attempt</th>
              <th scope="col">Recorded</th>
              <th scope="col">Result</th>
            </tr>
          </thead>
          <tbody id="job-steps" />
        </table>
        <ul id="job-links" />
      </section>
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
