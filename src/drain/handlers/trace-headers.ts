import type { TraceContext } from '../../engine/trace-context.js';

/**
 * Sends a trace context as W3C's `traceparent` and `tracestate` headers, so
 * the receiver's spans join its trace; a request that already has a
 * `traceparent` (its payload's, its definition's) keeps its own.
 */
export function setTraceHeaders(headers: Headers, context: TraceContext | undefined): void {
  if (context === undefined || headers.has('traceparent')) return;
  headers.set('traceparent', context.traceparent);
  if (context.tracestate === undefined) headers.delete('tracestate');
  else headers.set('tracestate', context.tracestate);
}
