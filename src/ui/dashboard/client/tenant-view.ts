/**
 * A tenant's limits. A refresh updates the line about it but leaves the form
 * alone, so it never overwrites what someone is typing.
 */
export const tenantViewJs = /* js */ `
let shownTenant = null;

function tenantPath(name) {
  return '/v1/tenants/' + encodeURIComponent(name);
}

async function loadTenant(name, refreshing) {
  const tenant = await api(tenantPath(name));
  shownTenant = name;
  byId('tenant-name').textContent = name;
  byId('tenant-summary').textContent =
    (tenant.custom ? 'Has settings of its own' : 'Runs on the defaults') + ' · ' + tenant.running + ' running now';
  if (!refreshing) fillTenantForm(tenant);
}

function fillTenantForm(tenant) {
  byId('tenant-concurrency').value = tenant.concurrency === null ? '' : tenant.concurrency;
  byId('tenant-rate-count').value = tenant.rateLimit ? tenant.rateLimit.count : '';
  byId('tenant-rate-seconds').value = tenant.rateLimit ? tenant.rateLimit.perSeconds : '';
  byId('tenant-weight').value = tenant.weight;
}

function numberIn(id) {
  const text = byId(id).value.trim();
  return text === '' ? null : Number(text);
}

/** The form as PUT /v1/tenants/{tenant} takes it; null when the rate limit is half filled. */
function tenantSettingsOfForm() {
  const count = numberIn('tenant-rate-count');
  const perSeconds = numberIn('tenant-rate-seconds');
  if ((count === null) !== (perSeconds === null)) return null;
  return {
    concurrency: numberIn('tenant-concurrency'),
    rateLimit: count === null ? null : { count, perSeconds },
    weight: numberIn('tenant-weight'),
  };
}

function describeTenantSettings(settings) {
  return [
    settings.concurrency === null ? 'no concurrency limit' : 'concurrency ' + settings.concurrency,
    settings.rateLimit === null ? 'no rate limit' : settings.rateLimit.count + ' jobs per ' + settings.rateLimit.perSeconds + ' s',
    'weight ' + settings.weight,
  ].join(' · ');
}

async function saveTenant(event) {
  event.preventDefault();
  const name = shownTenant;
  const settings = tenantSettingsOfForm();
  if (settings === null) return showNotice('error', 'Give both numbers of the rate limit, or neither.');
  if (!(await confirmAction('Change tenant ' + name + '?', describeTenantSettings(settings), 'Save'))) return;
  try {
    const tenant = await api(tenantPath(name), { method: 'PUT', body: settings });
    fillTenantForm(tenant);
    showNotice('ok', 'Saved. Tenant ' + name + ': ' + describeTenantSettings(tenant) + '.');
  } catch (problem) {
    showNotice('error', 'Refused. ' + problem.message);
  }
}

function wireTenantView() {
  byId('tenant-form').addEventListener('submit', saveTenant);
  byId('open-tenant').addEventListener('submit', (event) => {
    event.preventDefault();
    location.hash = '#/tenants/' + encodeURIComponent(byId('open-tenant-name').value.trim());
  });
}
`;
