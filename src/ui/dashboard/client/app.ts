/**
 * Signing in and out, the views behind the URL hash, and the live refresh:
 * the shown view reloads from the API every few seconds while the tab is
 * visible. Loads run one after another, so a slow answer never overwrites a
 * newer one.
 */
export const appJs = /* js */ `
const REFRESH_MS = 4000;
const VIEWS = {
  overview: { section: 'overview-view', nav: '#/', load: () => loadOverview() },
  jobs: { section: 'jobs-view', nav: '#/jobs', load: (route, refreshing) => loadJobs(route.params, refreshing) },
  job: { section: 'job-view', nav: '#/jobs', load: (route) => loadJob(route.name) },
  tenant: { section: 'tenant-view', nav: '#/', load: (route, refreshing) => loadTenant(route.name, refreshing) },
};
const SECTIONS = ['sign-in-view', ...Object.values(VIEWS).map((view) => view.section)];
let renders = Promise.resolve();
let pendingRenders = 0;

function currentRoute() {
  const [path, query] = location.hash.replace(/^#/, '').split('?');
  const params = new URLSearchParams(query || '');
  const [section, name] = path.split('/').filter(Boolean);
  let decoded = null;
  try {
    decoded = name === undefined ? null : decodeURIComponent(name);
  } catch {
    // A mangled link: show the list instead.
  }
  if (section === 'jobs') return decoded ? { view: 'job', name: decoded, params } : { view: 'jobs', params };
  if (section === 'tenants' && decoded) return { view: 'tenant', name: decoded, params };
  return { view: 'overview', params };
}

function showSection(id) {
  for (const section of SECTIONS) byId(section).hidden = section !== id;
}

function showSignedIn(signedIn) {
  byId('nav').hidden = !signedIn;
  byId('session').hidden = !signedIn;
}

function markNav(hash) {
  for (const link of byId('nav').querySelectorAll('a')) {
    if (link.getAttribute('href') === hash) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
}

function showSignIn(message) {
  showSignedIn(false);
  showSection('sign-in-view');
  const error = byId('sign-in-error');
  error.textContent = message || '';
  error.hidden = !message;
}

async function render(refreshing) {
  if (!storedKey()) return showSignIn();
  const route = currentRoute();
  const view = VIEWS[route.view];
  showSignedIn(true);
  markNav(view.nav);
  try {
    await view.load(route, refreshing);
    clearNotice('refresh');
    byId('refreshed').textContent = 'Updated ' + new Date().toLocaleTimeString();
  } catch (problem) {
    if (problem.status === 401) {
      forgetKey();
      clearNotice();
      return showSignIn('The key was refused. ' + problem.message);
    }
    showNotice('error', (refreshing ? 'Refresh failed. ' : '') + problem.message, 'refresh');
  }
  if (!refreshing) {
    showSection(view.section);
    // Land on the new view's heading, as a page load would.
    byId(view.section).querySelector('h1').focus({ preventScroll: true });
  }
}

function scheduleRender(refreshing) {
  pendingRenders += 1;
  renders = renders.then(() => render(refreshing)).finally(() => (pendingRenders -= 1));
}

function refreshIfIdle() {
  const busy = document.hidden || byId('confirm-dialog').open || pendingRenders > 0 || !storedKey();
  if (!busy) scheduleRender(true);
}

async function signIn(event) {
  event.preventDefault();
  const input = byId('api-key');
  storeKey(input.value.trim());
  try {
    await api('/v1/queues');
  } catch (problem) {
    forgetKey();
    return showSignIn(problem.message);
  }
  input.value = '';
  byId('sign-in-error').hidden = true;
  scheduleRender(false);
}

function signOut() {
  forgetKey();
  // A fresh page: nothing the key could read stays in it.
  location.hash = '#/';
  location.reload();
}

function start() {
  byId('sign-in-form').addEventListener('submit', signIn);
  byId('sign-out').addEventListener('click', signOut);
  wireOverview();
  wireJobList();
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
`;
