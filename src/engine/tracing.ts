import { parseTraceparent, tracestateProblem, type TraceContext } from './trace-context.js';

/**
 * Tracing, as skiplock's code uses it: spans with OpenTelemetry's messaging
 * semantic conventions, made by whatever tracer the application runs.
 * `openTelemetry(api)` makes one from the application's own
 * `@opentelemetry/api`; skiplock imports no tracing package, so without a
 * `tracing` option nothing of this runs, and nothing is bundled.
 */
export interface Tracing {
  startSpan(name: string, options: SpanOptions): TracedSpan;
  /** The context of the span active where this is called (the caller's), if there is one. */
  activeContext(): TraceContext | undefined;
}

export type SpanKind = 'producer' | 'consumer' | 'client' | 'internal';

export type SpanAttributes = Record<string, string | number | boolean>;

export interface SpanOptions {
  kind: SpanKind;
  attributes: SpanAttributes;
  /** Its parent: a context from elsewhere (a job's, a request's header); the active span when left out. */
  parent?: TraceContext | undefined;
  /** Contexts it links to: a job's creation context. */
  links?: readonly TraceContext[];
  /** When it started (ms since the epoch), if before now: a claim's span is made once it found jobs. */
  startTime?: number;
}

export interface TracedSpan {
  /** Its own context, to keep with a job or pass on; undefined when it has none (no tracer provider registered). */
  readonly traceContext: TraceContext | undefined;
  /** Runs `fn` with this span active, so the spans made inside are its children. */
  run<T>(fn: () => T): T;
  setAttributes(attributes: SpanAttributes): void;
  /** Ends it; `error` (its name and message) marks it failed. */
  end(error?: { name: string; message: string }): void;
}

/** `messaging.system` of skiplock's spans. */
export const MESSAGING_SYSTEM = 'skiplock';

/**
 * Runs an enqueue of `jobs` jobs to `queue` in a span (messaging `send`,
 * PRODUCER), child of `parent` (a request's traceparent) or of the active
 * span, and hands the enqueue the context to keep with its jobs: the span's,
 * so each attempt's span follows it. Without tracing, the enqueue gets
 * `parent` as it is.
 */
export async function inEnqueueSpan<T>(
  tracing: Tracing | undefined,
  target: { queue: string; jobs: number; parent?: TraceContext | undefined },
  enqueue: (context: TraceContext | undefined) => Promise<T>,
): Promise<T> {
  if (tracing === undefined) return enqueue(target.parent);
  return inSpan(
    tracing,
    `send ${target.queue}`,
    {
      kind: 'producer',
      parent: target.parent,
      attributes: {
        'messaging.system': MESSAGING_SYSTEM,
        'messaging.operation.type': 'send',
        'messaging.operation.name': 'send',
        'messaging.destination.name': target.queue,
        ...(target.jobs === 1 ? {} : { 'messaging.batch.message_count': target.jobs }),
      },
    },
    (context) => enqueue(context ?? target.parent),
  );
}

/**
 * Runs `fn` in a span, with the span active and its context handed to
 * `fn`, and ends the span when `fn` settles: failed, with the error's name
 * and message, when it throws.
 */
export async function inSpan<T>(
  tracing: Tracing,
  name: string,
  options: SpanOptions,
  fn: (context: TraceContext | undefined) => T | Promise<T>,
): Promise<Awaited<T>> {
  const span = tracing.startSpan(name, options);
  try {
    const result = await span.run(() => fn(span.traceContext));
    span.end();
    return result;
  } catch (error) {
    span.end(errorOf(error));
    throw error;
  }
}

function errorOf(error: unknown): { name: string; message: string } {
  return error instanceof Error
    ? { name: error.name, message: error.message }
    : { name: 'Error', message: String(error) };
}

// What skiplock uses of `@opentelemetry/api` (1.x), written out so that no
// type of skiplock names that package: an application without it type-checks.

/** A span context as `@opentelemetry/api` has it. */
export interface OtelSpanContext {
  traceId: string;
  spanId: string;
  traceFlags: number;
  isRemote?: boolean;
  traceState?: { serialize(): string };
}

export interface OtelSpan {
  spanContext(): OtelSpanContext;
  setAttributes(attributes: SpanAttributes): unknown;
  setStatus(status: { code: number; message?: string }): unknown;
  end(): void;
}

export interface OtelTracer {
  // Wide enough that the API's own SpanOptions fit it.
  startSpan(
    name: string,
    options?: { kind?: number; attributes?: object; links?: readonly unknown[]; startTime?: unknown },
    context?: unknown,
  ): OtelSpan;
}

/** The part of `@opentelemetry/api` (`import * as api from '@opentelemetry/api'`) that `openTelemetry` uses. */
export interface OpenTelemetryApi {
  trace: {
    getTracer(name: string, version?: string): OtelTracer;
    setSpanContext(context: never, spanContext: OtelSpanContext): unknown;
    setSpan(context: never, span: never): unknown;
    getSpanContext(context: never): OtelSpanContext | undefined;
  };
  context: {
    active(): unknown;
    with<F extends () => ReturnType<F>>(context: never, fn: F): ReturnType<F>;
  };
  ROOT_CONTEXT: unknown;
  createTraceState(raw?: string): { serialize(): string };
}

// OpenTelemetry's SpanKind and SpanStatusCode values, stable across 1.x.
const OTEL_SPAN_KIND: Record<SpanKind, number> = { internal: 0, client: 2, producer: 3, consumer: 4 };
const OTEL_STATUS_ERROR = 2;

export interface OpenTelemetryOptions {
  /** The tracer skiplock's spans come from; default `api.trace.getTracer('skiplock')`. */
  tracer?: OtelTracer;
}

/**
 * Tracing through the application's own OpenTelemetry API: spans go to the
 * tracer provider it registered (Node's SDK, a Workers exporter), and run
 * in its context manager, so a handler's own spans are children of its attempt's.
 *
 * ```ts
 * import * as api from '@opentelemetry/api';
 * const tracing = openTelemetry(api);
 * ```
 */
export function openTelemetry(api: OpenTelemetryApi, options: OpenTelemetryOptions = {}): Tracing {
  const tracer = options.tracer ?? api.trace.getTracer('skiplock');
  // Casts below: `never` in OpenTelemetryApi keeps its Context opaque here; these are values it made.
  const remote = (context: TraceContext): unknown => {
    const parts = parseTraceparent(context.traceparent);
    if (parts === undefined) return api.ROOT_CONTEXT;
    return api.trace.setSpanContext(api.ROOT_CONTEXT as never, {
      ...parts,
      isRemote: true,
      ...(context.tracestate === undefined ? {} : { traceState: api.createTraceState(context.tracestate) }),
    });
  };
  const spanContextOf = (context: TraceContext): OtelSpanContext | undefined =>
    api.trace.getSpanContext(remote(context) as never);
  return {
    startSpan(name, spanOptions) {
      const parent = spanOptions.parent === undefined ? api.context.active() : remote(spanOptions.parent);
      const links = (spanOptions.links ?? []).flatMap((link) => {
        const context = spanContextOf(link);
        return context === undefined ? [] : [{ context }];
      });
      const span = tracer.startSpan(
        name,
        {
          kind: OTEL_SPAN_KIND[spanOptions.kind],
          attributes: spanOptions.attributes,
          links,
          ...(spanOptions.startTime === undefined ? {} : { startTime: spanOptions.startTime }),
        },
        parent,
      );
      const active = api.trace.setSpan(parent as never, span as never);
      return {
        traceContext: traceContextOf(span.spanContext()),
        run: (fn) => api.context.with(active as never, fn),
        setAttributes: (attributes) => void span.setAttributes(attributes),
        end(error) {
          if (error !== undefined) {
            span.setAttributes({ 'error.type': error.name });
            span.setStatus({ code: OTEL_STATUS_ERROR, message: error.message });
          }
          span.end();
        },
      };
    },
    activeContext() {
      const context = api.trace.getSpanContext(api.context.active() as never);
      return context === undefined ? undefined : traceContextOf(context);
    },
  };
}

/**
 * A span context as W3C headers: undefined for the invalid (all-zero) one a
 * tracer without a provider gives; without a tracestate that skiplock would
 * not keep (longer than 512 characters), as a propagator may drop it.
 */
function traceContextOf(context: OtelSpanContext): TraceContext | undefined {
  const flags = (context.traceFlags & 0xff).toString(16).padStart(2, '0');
  const traceparent = `00-${context.traceId}-${context.spanId}-${flags}`;
  if (parseTraceparent(traceparent) === undefined) return undefined;
  const tracestate = context.traceState?.serialize();
  return tracestate === undefined || tracestate === '' || tracestateProblem(tracestate) !== undefined
    ? { traceparent }
    : { traceparent, tracestate };
}
