/**
 * Calls to the JSON API with the signed-in key. The key lives in
 * sessionStorage (this tab only, gone when it closes) and travels only in
 * the Authorization header. A refusal becomes an ApiProblemError carrying the
 * problem document's title and detail, which is what the page shows.
 */

const KEY_STORAGE = 'skiplock.apiKey';
/** A request with no answer by then is reported, so the page never waits on it for good; the next refresh asks again. */
const ANSWER_TIMEOUT_MS = 30_000;

interface Problem {
  title: string;
  detail?: string;
}

/** The API's refusal, as its problem document told it. */
export class ApiProblemError extends Error {
  override readonly name = 'ApiProblemError';
  readonly status: number;

  constructor(status: number, problem: Problem) {
    super(problem.detail ? `${problem.title}: ${problem.detail}` : problem.title);
    this.status = status;
  }
}

/** What the page says of a failure: an ApiProblemError's words, or any other error's message. */
export function problemMessage(problem: unknown): string {
  return problem instanceof Error ? problem.message : String(problem);
}

export function storedKey(): string | null {
  return sessionStorage.getItem(KEY_STORAGE);
}

export function storeKey(key: string): void {
  sessionStorage.setItem(KEY_STORAGE, key);
}

export function forgetKey(): void {
  sessionStorage.removeItem(KEY_STORAGE);
}

/** A refusal's problem document, when its body is one. */
function problemOf(body: unknown): Problem | null {
  if (typeof body !== 'object' || body === null || !('title' in body) || typeof body.title !== 'string' || !body.title)
    return null;
  return { title: body.title, ...('detail' in body && typeof body.detail === 'string' ? { detail: body.detail } : {}) };
}

interface ApiOptions {
  method?: 'GET' | 'POST' | 'PUT';
  body?: unknown;
}

/**
 * The answer to `path`, as the type the caller names from the route's
 * schema (api-types.ts): the server built it from that schema, and the page
 * trusts its own origin's API rather than checking every body again.
 */
export async function api<T>(path: string, options: ApiOptions = {}): Promise<T> {
  const headers: Record<string, string> = { authorization: `Bearer ${storedKey()}` };
  const init: RequestInit = {
    method: options.method ?? 'GET',
    headers,
    cache: 'no-store',
    signal: AbortSignal.timeout(ANSWER_TIMEOUT_MS),
  };
  if (options.body !== undefined) {
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(options.body);
  }
  let response: Response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    throw noAnswer(error);
  }
  const body: unknown = await response.json().catch(() => null);
  if (response.ok) return body as T;
  throw new ApiProblemError(
    response.status,
    problemOf(body) ?? { title: `HTTP ${response.status}`, detail: response.statusText },
  );
}

function noAnswer(error: unknown): ApiProblemError {
  const timedOut = error instanceof DOMException && error.name === 'TimeoutError';
  return new ApiProblemError(0, {
    title: 'No answer',
    detail: timedOut ? `the server did not answer in ${ANSWER_TIMEOUT_MS / 1000} s` : 'the server could not be reached',
  });
}
