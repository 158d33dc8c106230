import { createClient } from 'skiplock/client';
import type { sendWelcome } from './jobs.js';

/**
 * How another Worker of yours enqueues into this one: through a service
 * binding, typed by a type-only import of the job definition.
 */
export async function enqueueWelcome(queue: Fetcher, apiKey: string, userId: number): Promise<string> {
  const client = createClient('https://queue.internal', { apiKey, fetch: (input, init) => queue.fetch(input, init) });
  const job = await client.enqueue<typeof sendWelcome>('send-welcome', { userId });
  return job.id;
}
