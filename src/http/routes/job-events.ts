import { z } from '@hono/zod-openapi';
import { streamSSE, type SSEStreamingApi } from 'hono/streaming';
import { FINAL_STATUSES } from '../../engine/index.js';
import type { AppDeps } from '../context.js';
import { jobReader } from '../job-reader.js';
import { pollJob, POLL_INTERVAL_MS, type JobRepresentation, type JobVersion } from '../job-versions.js';
import { authorizedRoute, problemResponses } from '../openapi-responses.js';
import { logError } from '../logging.js';
import { jobNotFound, tooManyRequests } from '../problem.js';
import { JobIdParamsSchema } from '../schemas/job.js';
import { LIMITS } from '../limits.js';
import { router } from '../validation.js';
import { WatcherSlots } from '../watcher-slots.js';

/**
 * One stream lasts this long at most, then the browser's EventSource
 * reconnects (with Last-Event-ID, so an unchanged job is not sent twice).
 * Bounded so one stream's reads stay within a Worker's subrequest budget.
 */
const STREAM_SECONDS = 40;
/** A comment line this often keeps proxies from closing a quiet stream. */
const HEARTBEAT_SECONDS = 15;
/** How long the browser waits before reconnecting. */
const RECONNECT_MS = 2000;

const EventsQuerySchema = z.object({
  token: z.string().optional().describe("The statusUrl's token, instead of an API key."),
});

export function jobEventRoutes(deps: AppDeps) {
  const jobEventsRoute = authorizedRoute(
    deps,
    { scopes: ['read'], statusToken: true },
    {
      method: 'get',
      path: '/v1/jobs/{id}/events',
      operationId: 'streamJobEvents',
      tags: ['jobs'],
      summary: "Server-sent events of a job's changes until it ends",
      description:
        'Each change is an `event: job` whose data is the job (to a status token: its status view, JobStatusView) and ' +
        'whose id is its ETag; `event: end` follows the ' +
        `final status, then the stream closes. A stream lasts at most ${STREAM_SECONDS} s; reconnecting with ` +
        "Last-Event-ID resumes it. Opens with an API key or the job's status token. At most " +
        `${LIMITS.maxStreamsPerJob} streams of one job are open at once (per Worker isolate); more answer 429.`,
      request: { params: JobIdParamsSchema, query: EventsQuerySchema },
      responses: {
        200: { description: 'The event stream', content: { 'text/event-stream': { schema: z.string() } } },
        ...problemResponses(400, 401, 403, 404, 503),
      },
    },
  );

  const streams = new WatcherSlots(LIMITS.maxStreamsPerJob);

  return router().openapi(jobEventsRoute, async (c) => {
    const { id } = c.req.valid('param');
    const read = jobReader(deps, c, id);
    // Read once before streaming, so a job the caller cannot see is a plain 404.
    if ((await read()) === undefined) throw jobNotFound();
    const release = streams.acquire(id);
    if (release === undefined) {
      const detail = `${LIMITS.maxStreamsPerJob} event streams of this job are open already: retry later`;
      throw tooManyRequests('too-many-watchers', 'Too many watchers', detail, RECONNECT_MS / 1000);
    }
    const lastEventId = c.req.header('last-event-id');
    const versions = pollJob(read, (STREAM_SECONDS * 1000) / POLL_INTERVAL_MS);
    return streamSSE(c, async (stream) => {
      try {
        await streamChanges(stream, versions, lastEventId);
      } catch (error) {
        // The status line is sent: the stream can only say it failed, and the log says why.
        logError(c.var.requestId, 'event_stream_failed', error);
        await stream.writeSSE({ event: 'error', data: 'the job could not be read; reconnect to resume' });
      } finally {
        release();
      }
    });
  });
}

async function streamChanges<J extends JobRepresentation>(
  stream: SSEStreamingApi,
  versions: AsyncGenerator<JobVersion<J> | undefined>,
  lastSentEtag: string | undefined,
): Promise<void> {
  let sent = lastSentEtag;
  let readsSinceWrite = 0;
  for await (const version of versions) {
    if (stream.aborted) return;
    if (version === undefined) {
      // Pruned, or gone from the caller's view, while it was watched.
      await stream.writeSSE({ event: 'end', data: 'gone' });
      return;
    }
    if (version.etag !== sent) {
      await stream.writeSSE({ event: 'job', id: version.etag, data: JSON.stringify(version.job), retry: RECONNECT_MS });
      sent = version.etag;
      readsSinceWrite = 0;
    } else if (++readsSinceWrite * POLL_INTERVAL_MS >= HEARTBEAT_SECONDS * 1000) {
      await stream.write(': heartbeat\n\n');
      readsSinceWrite = 0;
    }
    if (FINAL_STATUSES.includes(version.job.status)) {
      await stream.writeSSE({ event: 'end', data: version.job.status });
      return;
    }
  }
}
