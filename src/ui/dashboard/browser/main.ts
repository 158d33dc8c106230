import { byId } from '../../browser/shared.js';
import { wireBulkActions } from './bulk-actions.js';
import { api, ApiProblemError, forgetKey, problemMessage, storedKey, storeKey } from './api.js';
import { loadJobs, wireJobList } from './job-list.js';
import { loadJob, wireJobView } from './job-view.js';
import { clearNotice, showNotice } from './notice.js';
import { loadOverview, wireOverview } from './overview.js';
import { loadTenant, wireTenantView } from './tenant-view.js';

/**
 * The dashboard's script: signing in and out, the views behind the URL
 * hash, and the live refresh: the shown view reloads from the API every few
 * seconds while the tab is visible. Loads run one after another, so a slow
 * answer never overwrites a newer one.
 */

const REFRESH_MS = 4000;

type Route =
  | { view: 'overview' }
  | { view: 'jobs'; params: URLSearchParams }
  | { view: 'job'; name: string }
  | { view: 'tenant'; name: string };

interface View {
  section: string;
  /** The nav link that is current while the view shows. */
  nav: string;
}

const VIEWS: Record<Route['view'], View> = {
  overview: { section: 'overview-view', nav: '#/' },
  jobs: { section: 'jobs-view', nav: '#/jobs' },
  job: { section: 'job-view', nav: '#/jobs' },
  tenant: { section: 'tenant-view', nav: '#/' },
};
const SECTIONS = ['sign-in-view', ...Object.values(VIEWS).map((view) => view.section)];
let renders = Promise.resolve();
let pendingRenders = 0;

function currentRoute(): Route {
  const [path = '', query] = location.hash.replace(/^#/, '').split('?');
  const [section, name] = path.split('/').filter(Boolean);
  let decoded: string | null = null;
  try {
    decoded = name === undefined ? null : decodeURIComponent(name);
  } catch {
    // A mangled link: show the list instead.
  }
  if (section === 'jobs')
    return decoded ? { view: 'job', name: decoded } : { view: 'jobs', params: new URLSearchParams(query ?? '') };
  if (section === 'tenants' && decoded) return { view: 'tenant', name: decoded };
  return { view: 'overview' };
}

/** Reads the route's view from the API and shows what it says; a refresh keeps what someone is typing. */
function load(route: Route, refreshing: boolean): Promise<void> {
  switch (route.view) {
    case 'overview':
      return loadOverview();
    case 'jobs':
      return loadJobs(route.params, refreshing);
    case 'job':
      return loadJob(route.name);
    case 'tenant':
      return loadTenant(route.name, refreshing);
  }
}

function showSection(id: string): void {
  for (const section of SECTIONS) byId(section).hidden = section !== id;
}

function showSignedIn(signedIn: boolean): void {
  byId('nav').hidden = !signedIn;
  byId('session').hidden = !signedIn;
}

function markNav(hash: string): void {
  for (const link of byId('nav').querySelectorAll('a')) {
    if (link.getAttribute('href') === hash) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
}

function showSignIn(message?: string): void {
  showSignedIn(false);
  showSection('sign-in-view');
  const error = byId('sign-in-error');
  error.textContent = message ?? '';
  error.hidden = !message;
}

async function render(refreshing: boolean): Promise<void> {
  if (!storedKey()) return showSignIn();
  const route = currentRoute();
  const view = VIEWS[route.view];
  showSignedIn(true);
  markNav(view.nav);
  try {
    await load(route, refreshing);
    clearNotice('refresh');
    byId('refreshed').textContent = `Updated ${new Date().toLocaleTimeString()}`;
  } catch (problem) {
    if (problem instanceof ApiProblemError && problem.status === 401) {
      forgetKey();
      clearNotice();
      return showSignIn(`The key was refused. ${problem.message}`);
    }
    showNotice('error', (refreshing ? 'Refresh failed. ' : '') + problemMessage(problem), 'refresh');
  }
  if (!refreshing) {
    showSection(view.section);
    // Land on the new view's heading, as a page load would.
    byId(view.section).querySelector('h1')?.focus({ preventScroll: true });
  }
}

function scheduleRender(refreshing: boolean): void {
  pendingRenders += 1;
  renders = renders.then(() => render(refreshing)).finally(() => (pendingRenders -= 1));
}

function refreshIfIdle(): void {
  const busy = document.hidden || byId('confirm-dialog', HTMLDialogElement).open || pendingRenders > 0 || !storedKey();
  if (!busy) scheduleRender(true);
}

async function signIn(event: SubmitEvent): Promise<void> {
  event.preventDefault();
  const input = byId('api-key', HTMLInputElement);
  storeKey(input.value.trim());
  try {
    await api('/v1/queues');
  } catch (problem) {
    forgetKey();
    return showSignIn(problemMessage(problem));
  }
  input.value = '';
  byId('sign-in-error').hidden = true;
  scheduleRender(false);
}

function signOut(): void {
  forgetKey();
  // A fresh page: nothing the key could read stays in it.
  location.hash = '#/';
  location.reload();
}

function start(): void {
  byId('sign-in-form').addEventListener('submit', signIn);
  byId('sign-out').addEventListener('click', signOut);
  wireOverview(() => scheduleRender(true));
  wireJobList();
  wireBulkActions(() => scheduleRender(true));
  wireJobView();
  wireTenantView();
  window.addEventListener('hashchange', () => {
    clearNotice();
    scheduleRender(false);
  });
  document.addEventListener('visibilitychange', refreshIfIdle);
  setInterval(refreshIfIdle, REFRESH_MS);
  scheduleRender(false);
}

start();
