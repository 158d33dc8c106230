import { byId } from '../../browser/shared.js';
import { api, problemMessage } from './api.js';
import type { Tenant, TenantSettings } from './api-types.js';
import { confirmAction, showNotice } from './notice.js';

/**
 * A tenant's limits. A refresh updates the line about it but leaves the form
 * alone, so it never overwrites what someone is typing.
 */

let shownTenant: string | null = null;

function tenantPath(name: string): string {
  return `/v1/tenants/${encodeURIComponent(name)}`;
}

function numberField(id: string): HTMLInputElement {
  return byId(id, HTMLInputElement);
}

export async function loadTenant(name: string, refreshing: boolean): Promise<void> {
  const tenant = await api<Tenant>(tenantPath(name));
  shownTenant = name;
  byId('tenant-name').textContent = name;
  byId('tenant-summary').textContent =
    `${tenant.custom ? 'Has settings of its own' : 'Runs on the defaults'} · ${tenant.running} running now`;
  if (!refreshing) fillTenantForm(tenant);
}

function fillTenantForm(tenant: Tenant): void {
  numberField('tenant-concurrency').value = tenant.concurrency === null ? '' : String(tenant.concurrency);
  numberField('tenant-rate-count').value = tenant.rateLimit ? String(tenant.rateLimit.count) : '';
  numberField('tenant-rate-seconds').value = tenant.rateLimit ? String(tenant.rateLimit.perSeconds) : '';
  numberField('tenant-weight').value = String(tenant.weight);
}

function numberIn(id: string): number | null {
  const text = numberField(id).value.trim();
  return text === '' ? null : Number(text);
}

/** The form as PUT /v1/tenants/{tenant} takes it; null when the rate limit is half filled. */
function tenantSettingsOfForm(): TenantSettings | null {
  const count = numberIn('tenant-rate-count');
  const perSeconds = numberIn('tenant-rate-seconds');
  if ((count === null) !== (perSeconds === null)) return null;
  return {
    concurrency: numberIn('tenant-concurrency'),
    rateLimit: count === null || perSeconds === null ? null : { count, perSeconds },
    // The field is required, so it is never empty here; the API's default otherwise.
    weight: numberIn('tenant-weight') ?? 1,
  };
}

function describeTenantSettings(settings: TenantSettings | Tenant): string {
  return [
    settings.concurrency === null ? 'no concurrency limit' : `concurrency ${settings.concurrency}`,
    settings.rateLimit === null
      ? 'no rate limit'
      : `${settings.rateLimit.count} jobs per ${settings.rateLimit.perSeconds} s`,
    `weight ${settings.weight}`,
  ].join(' · ');
}

async function saveTenant(event: SubmitEvent): Promise<void> {
  event.preventDefault();
  const name = shownTenant;
  const settings = tenantSettingsOfForm();
  if (name === null) return;
  if (settings === null) return showNotice('error', 'Give both numbers of the rate limit, or neither.');
  if (!(await confirmAction(`Change tenant ${name}?`, describeTenantSettings(settings), 'Save'))) return;
  try {
    const tenant = await api<Tenant>(tenantPath(name), { method: 'PUT', body: settings });
    fillTenantForm(tenant);
    showNotice('ok', `Saved. Tenant ${name}: ${describeTenantSettings(tenant)}.`);
  } catch (problem) {
    showNotice('error', `Refused. ${problemMessage(problem)}`);
  }
}

export function wireTenantView(): void {
  byId('tenant-form').addEventListener('submit', saveTenant);
  byId('open-tenant').addEventListener('submit', (event) => {
    event.preventDefault();
    location.hash = `#/tenants/${encodeURIComponent(byId('open-tenant-name', HTMLInputElement).value.trim())}`;
  });
}
