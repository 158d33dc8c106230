/** A tenant's limits: concurrency, rate limit and weight, as PUT /v1/tenants/{tenant} takes them. */
export function TenantView() {
  return (
    <section id="tenant-view" aria-labelledby="tenant-title" hidden>
      <p>
        <a href="#/">← Overview</a>
      </p>
      <h1 id="tenant-title" tabindex={-1}>
        Tenant <code id="tenant-name" />
      </h1>
      <p id="tenant-summary" class="muted" />
      <form id="tenant-form" class="panel stack narrow">
        <div class="field">
          <label for="tenant-concurrency">Concurrency</label>
          <input
            id="tenant-concurrency"
            type="number"
            min="0"
            max="100000"
            step="1"
            inputmode="numeric"
            aria-describedby="tenant-concurrency-hint"
          />
          <small id="tenant-concurrency-hint" class="muted">
            Jobs running at once. Empty: no limit.
          </small>
        </div>
        <fieldset>
          <legend>Rate limit</legend>
          <div class="row">
            <div class="field">
              <label for="tenant-rate-count">Jobs started</label>
              <input id="tenant-rate-count" type="number" min="0" max="1000000" step="1" inputmode="numeric" />
            </div>
            <div class="field">
              <label for="tenant-rate-seconds">per seconds</label>
              <input id="tenant-rate-seconds" type="number" min="1" max="86400" step="1" inputmode="numeric" />
            </div>
          </div>
          <small class="muted">Both empty: no rate limit.</small>
        </fieldset>
        <div class="field">
          <label for="tenant-weight">Weight</label>
          <input
            id="tenant-weight"
            type="number"
            min="1"
            max="1000"
            step="1"
            inputmode="numeric"
            required
            aria-describedby="tenant-weight-hint"
          />
          <small id="tenant-weight-hint" class="muted">
            Share of turns when tenants compete, 1 to 1000.
          </small>
        </div>
        <div class="actions">
          <button type="submit">Save</button>
        </div>
      </form>
    </section>
  );
}
