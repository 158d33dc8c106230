/**
 * The groups of the OpenAPI document's operations. SDK generators make one
 * class or module per tag, so each operation has exactly one.
 */
export const API_TAGS = [
  { name: 'jobs', description: 'Enqueue jobs, follow them, list, cancel and retry them.' },
  {
    name: 'pull',
    description: 'Workers in any language claim jobs with a lease, heartbeat, and complete, fail or release them.',
  },
  {
    name: 'stats',
    description: 'Job counts per queue, tenant and status, throughput, wait and run times, and queue health.',
  },
  { name: 'tenants', description: "A tenant's concurrency, rate limit and weight." },
  { name: 'queues', description: "A queue's concurrency cap and weight." },
  {
    name: 'concurrency-keys',
    description: 'Concurrency and ordering keys: their slots, their held jobs, and the keys a failed head holds.',
  },
  { name: 'keys', description: 'API keys and their scopes.' },
  { name: 'health', description: 'Liveness.' },
] as const;

export type ApiTag = (typeof API_TAGS)[number]['name'];
