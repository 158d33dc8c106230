/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent`
 * and `tracestate` a job is enqueued with, kept in
 * skiplock.job_trace_contexts, so the drain's spans for its attempts join
 * the trace of whatever enqueued it.
 */
export interface TraceContext {
  /** `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`, lower case, neither id all zeros. */
  traceparent: string;
  /** Vendors' entries (`key=value`, comma-separated), at most 512 characters. */
  tracestate?: string;
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The longest tracestate kept: W3C asks propagators to keep at least 512 characters. */
export const MAX_TRACESTATE_LENGTH = 512;

// One list member: a key (simple, or tenant@system) and a value of printable
// ASCII without ',' or '=' that does not end in a space.
const TRACESTATE_MEMBER =
  /^(?:[a-z][a-z0-9_\-*/]{0,255}|[a-z0-9][a-z0-9_\-*/]{0,240}@[a-z][a-z0-9_\-*/]{0,13})=[\x20-\x2b\x2d-\x3c\x3e-\x7e]{0,255}[\x21-\x2b\x2d-\x3c\x3e-\x7e]$/;

/** The parts of a well-formed version-00 traceparent; undefined for anything else. */
export function parseTraceparent(text: unknown): { traceId: string; spanId: string; traceFlags: number } | undefined {
  if (typeof text !== 'string') return undefined;
  const parts = TRACEPARENT.exec(text);
  if (parts === null) return undefined;
  const [, traceId, spanId, flags] = parts as unknown as [string, string, string, string];
  if (/^0+$/.test(traceId) || /^0+$/.test(spanId)) return undefined;
  return { traceId, spanId, traceFlags: Number.parseInt(flags, 16) };
}

/** What is wrong with a traceparent, or undefined when it is well formed. */
export function traceparentProblem(text: unknown): string | undefined {
  return parseTraceparent(text) === undefined
    ? 'must be a W3C traceparent: 00-<32 hex digits>-<16 hex digits>-<2 hex digits>, lower case, neither id all zeros'
    : undefined;
}

/** What is wrong with a tracestate, or undefined when it is well formed (empty members between commas are allowed). */
export function tracestateProblem(text: unknown): string | undefined {
  if (typeof text !== 'string') return 'must be a string';
  if (text.length > MAX_TRACESTATE_LENGTH) return `must be at most ${MAX_TRACESTATE_LENGTH} characters`;
  const members = text
    .split(',')
    .map((member) => member.trim())
    .filter((member) => member !== '');
  if (members.length > 32) return 'holds at most 32 list members';
  const bad = members.find((member) => !TRACESTATE_MEMBER.test(member));
  return bad === undefined ? undefined : `must be W3C tracestate list members (key=value); "${bad}" is not one`;
}
