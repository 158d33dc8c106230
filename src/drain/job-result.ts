import type { Json } from '../engine/types.js';

/** A result is stored on the job row, which every claim scans past: keep it small. */
export const MAX_RESULT_BYTES = 64 * 1024;

export type JobResult = { ok: true; value: Json } | { ok: false; problem: string };

/** Turns a handler's return value into the job's result, or says why it cannot be one. */
export function toJobResult(value: unknown): JobResult {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (error) {
    return { ok: false, problem: `the handler's result is not JSON: ${(error as Error).message}` };
  }
  // undefined (no return value), a function or a symbol: no result.
  if (text === undefined) return { ok: true, value: null };
  // UTF-8 takes at most 3 bytes per UTF-16 unit: only long text needs counting.
  const bytes = text.length * 3 <= MAX_RESULT_BYTES ? text.length : new TextEncoder().encode(text).length;
  if (bytes > MAX_RESULT_BYTES) {
    return {
      ok: false,
      problem: `the handler's result is ${bytes} bytes of JSON, above the ${MAX_RESULT_BYTES}-byte cap: store large output elsewhere and return a reference to it`,
    };
  }
  return { ok: true, value: JSON.parse(text) as Json };
}
