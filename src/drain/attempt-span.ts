import type { ClaimedJob } from '../engine/types.js';
import { MESSAGING_SYSTEM, type TracedSpan, type Tracing } from '../engine/tracing.js';
import type { AttemptOutcome } from './run-attempt.js';

/**
 * The span of one attempt (messaging `process`, CONSUMER): a child of the
 * context the job was enqueued with, and linked to it, as OpenTelemetry's
 * messaging conventions ask of a message processed on its own, so the
 * attempt joins the enqueuer's trace. A job enqueued without one is a
 * child of the span active in the drain, if any (a traced invocation's), or starts a trace.
 */
export function startAttemptSpan(tracing: Tracing, job: ClaimedJob): TracedSpan {
  const created = job.traceContext;
  return tracing.startSpan(`process ${job.queue}`, {
    kind: 'consumer',
    parent: created,
    links: created === undefined ? [] : [created],
    attributes: {
      'messaging.system': MESSAGING_SYSTEM,
      'messaging.operation.type': 'process',
      'messaging.operation.name': 'process',
      'messaging.destination.name': job.queue,
      'messaging.message.id': job.id,
      'skiplock.job.type': job.type,
      'skiplock.job.tenant': job.tenant,
      'skiplock.job.attempt': job.attempts,
    },
  });
}

/**
 * The span of a claim that found jobs (messaging `receive`, CLIENT), from
 * when it was sent: linked to the jobs' creation contexts, as the
 * conventions ask of a batch received. Made once the claim answered, so an
 * idle loop's empty claims make none.
 */
export function recordClaimSpan(
  tracing: Tracing,
  jobs: readonly ClaimedJob[],
  claim: { sentAt: number; workerId: string },
): void {
  const queues = [...new Set(jobs.map((job) => job.queue))];
  tracing
    .startSpan(queues.length === 1 ? `receive ${queues[0]}` : 'receive', {
      kind: 'client',
      startTime: claim.sentAt,
      links: jobs.flatMap((job) => (job.traceContext === undefined ? [] : [job.traceContext])),
      attributes: {
        'messaging.system': MESSAGING_SYSTEM,
        'messaging.operation.type': 'receive',
        'messaging.operation.name': 'receive',
        'messaging.batch.message_count': jobs.length,
        'messaging.client.id': claim.workerId,
        ...(queues.length === 1 ? { 'messaging.destination.name': queues[0]! } : {}),
      },
    })
    .end();
}

/** Ends an attempt's span with how the attempt ended: a failure (or a cancel) marks it failed. */
export function endAttemptSpan(span: TracedSpan, outcome: AttemptOutcome): void {
  span.setAttributes({ 'skiplock.job.outcome': outcome.kind });
  if (outcome.kind === 'failed' || outcome.kind === 'cancelled') {
    const error = outcome.error as { name?: unknown; message?: unknown } | null;
    span.end({ name: String(error?.name ?? 'Error'), message: String(error?.message ?? '') });
  } else {
    span.end();
  }
}
