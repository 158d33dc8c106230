import { PermanentError, RetryAfterError } from '../job-errors.js';
import { timeoutSignal } from '../timeout-signal.js';

/** Longest Retry-After honoured; a longer one is someone's mistake, not a plan. */
const MAX_RETRY_AFTER_SECONDS = 24 * 3600;

/**
 * Sends a delivery within `timeoutMs` (or until the attempt's signal fires),
 * and reads the first `maxBytes` of its answer in that time too. A timeout
 * or a network error becomes an error that says where it went (the attempt
 * retries); a PermanentError (a refused address) passes through.
 */
export async function sendAndRead(
  url: URL,
  { timeoutMs, attempt, maxBytes }: { timeoutMs: number; attempt: AbortSignal; maxBytes: number },
  send: (signal: AbortSignal) => Promise<Response>,
): Promise<{ response: Response; text: string }> {
  const timeout = timeoutSignal(attempt, timeoutMs);
  let response: Response;
  try {
    response = await send(timeout.signal);
  } catch (error) {
    timeout.clear();
    if (error instanceof PermanentError) throw error;
    const timedOut = error instanceof Error && error.name === 'TimeoutError';
    throw new Error(
      timedOut
        ? `${url.origin} did not answer within ${timeoutMs} ms`
        : `request to ${url.origin} failed: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  try {
    return { response, text: await readStart(response, maxBytes) };
  } finally {
    timeout.clear();
  }
}

/**
 * The error a delivery that was not answered 2xx fails with: after
 * Retry-After when a 429 or 503 gives one; for good on a 4xx other than 408
 * and 429 (the request itself is wrong); otherwise retried with backoff
 * (5xx, 408, 429, and 3xx: redirects are not followed).
 */
export function failedDelivery(url: URL, response: Response, text: string): Error {
  const { status } = response;
  const what = `${url.origin} answered ${status}${text === '' ? '' : `: ${text.slice(0, 200)}`}`;
  const retryAfter =
    status === 429 || status === 503 ? retryAfterSeconds(response.headers.get('retry-after')) : undefined;
  if (retryAfter !== undefined) return new RetryAfterError(retryAfter, what);
  if (status >= 400 && status < 500 && status !== 408 && status !== 429) return new PermanentError(what);
  return new Error(what);
}

/** The first `maxBytes` of the body as text; the rest is never downloaded. */
export async function readStart(response: Response, maxBytes: number): Promise<string> {
  if (response.body === null) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < maxBytes) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      size += value.byteLength;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  const bytes = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return new TextDecoder().decode(bytes.subarray(0, maxBytes));
}

/** Retry-After as seconds (`120`) or an HTTP date; undefined when absent or unreadable. */
function retryAfterSeconds(header: string | null): number | undefined {
  if (header === null) return undefined;
  const seconds = /^\d+$/.test(header.trim()) ? Number(header.trim()) : (Date.parse(header) - Date.now()) / 1000;
  return Number.isFinite(seconds) ? Math.min(MAX_RETRY_AFTER_SECONDS, Math.max(0, seconds)) : undefined;
}
