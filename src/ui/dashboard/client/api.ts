/**
 * Calls to the JSON API with the signed-in key. The key lives in
 * sessionStorage (this tab only, gone when it closes) and travels only in
 * the Authorization header. A refusal becomes an ApiProblem carrying the
 * problem document's title and detail, which is what the page shows.
 */
export const apiJs = /* js */ `
const KEY_STORAGE = 'skiplock.apiKey';

class ApiProblem extends Error {
  constructor(status, problem) {
    super(problem.detail ? problem.title + ': ' + problem.detail : problem.title);
    this.status = status;
  }
}

function storedKey() {
  return sessionStorage.getItem(KEY_STORAGE);
}

function storeKey(key) {
  sessionStorage.setItem(KEY_STORAGE, key);
}

function forgetKey() {
  sessionStorage.removeItem(KEY_STORAGE);
}

async function api(path, options = {}) {
  const headers = { authorization: 'Bearer ' + storedKey() };
  const init = { method: options.method || 'GET', headers, cache: 'no-store' };
  if (options.body !== undefined) {
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(options.body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new ApiProblem(0, { title: 'No answer', detail: 'the server could not be reached' });
  }
  const body = await response.json().catch(() => null);
  if (response.ok) return body;
  throw new ApiProblem(response.status, body && body.title ? body : { title: 'HTTP ' + response.status, detail: response.statusText });
}
`;
