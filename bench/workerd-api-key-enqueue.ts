/**
 * `npm run bench:workerd-api-key`: the latency of a single enqueue through
 * the Worker in workerd (bench/workerd-stack.ts, cron off, the fast path on),
 * with the ADMIN_TOKEN and with an API key, one client sending one request
 * after another, at each round trip of NEON_PROXY_ROUND_TRIP_MS (0,50 by
 * default). An API key's check was a statement of its own before the
 * enqueue's (issue 42): BEFORE_CHECKOUT names a checkout of the earlier code
 * (with its node_modules), measured in the same run, in alternating turns.
 * Prints p50 / p99 in ms for each Worker and key, and the database round
 * trips per request (the Neon proxy's SQL-over-HTTP requests; the fast path's
 * drains count too).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { percentile } from './stats';
import { adminHeaders, createBenchDatabase } from './worker-stack';
import { startWorkerdStack, type WorkerdStack } from './workerd-stack';
import { roundTripsFrom } from './workerd-round-trips';

const TURNS = Number(process.env.TURNS ?? 4);
const REQUESTS_PER_TURN = Number(process.env.REQUESTS_PER_TURN ?? 50);

interface Target {
  worker: string;
  auth: 'admin-token' | 'api-key';
  stack: WorkerdStack;
  authorization: string;
  latencies: number[];
  trips: number;
}

async function main(): Promise<void> {
  const checkouts: [string, string | undefined][] = [['this checkout', undefined]];
  if (process.env.BEFORE_CHECKOUT) checkouts.unshift(['before', process.env.BEFORE_CHECKOUT]);
  const results = [];
  for (const roundTripMs of roundTripsFrom(process.env.NEON_PROXY_ROUND_TRIP_MS ?? '0,50')) {
    process.env.NEON_PROXY_ROUND_TRIP_MS = String(roundTripMs);
    results.push({ roundTripMs, targets: await measure(checkouts) });
  }
  console.log(JSON.stringify({ turns: TURNS, requestsPerTurn: REQUESTS_PER_TURN, results }, null, 2));
}

async function measure(checkouts: [string, string | undefined][]) {
  const databases = await Promise.all(
    checkouts.map(([name]) => createBenchDatabase(`apikey_${name === 'before' ? 'before' : 'after'}`)),
  );
  const stacks: WorkerdStack[] = [];
  try {
    for (const [index, [, checkout]] of checkouts.entries()) {
      stacks.push(await startWorkerdStack(databases[index]!.url, {}, { cron: false, checkout }));
    }
    const targets: Target[] = [];
    for (const [index, stack] of stacks.entries()) {
      const worker = checkouts[index]![0];
      targets.push({
        worker,
        auth: 'admin-token',
        stack,
        authorization: adminHeaders.authorization,
        latencies: [],
        trips: 0,
      });
      targets.push({
        worker,
        auth: 'api-key',
        stack,
        authorization: `Bearer ${await newKey(stack)}`,
        latencies: [],
        trips: 0,
      });
    }
    for (const target of targets) await enqueues(target, 20, []); // warm-up
    for (let turn = 0; turn < TURNS; turn++) {
      // Alternating order, so neither side always follows the other.
      const order = turn % 2 === 0 ? targets : [...targets].reverse();
      for (const target of order) {
        const before = target.stack.traffic().httpRequests;
        await enqueues(target, REQUESTS_PER_TURN, target.latencies);
        target.trips += target.stack.traffic().httpRequests - before;
        await sleep(200);
      }
    }
    return targets.map(({ worker, auth, latencies, trips }) => ({
      worker,
      auth,
      requests: latencies.length,
      p50: round(percentile(latencies, 0.5)),
      p99: round(percentile(latencies, 0.99)),
      tripsPerRequest: round(trips / latencies.length),
    }));
  } finally {
    for (const stack of stacks) await stack.stop();
    for (const database of databases) await database.drop();
  }
}

async function newKey(stack: WorkerdStack): Promise<string> {
  const response = await fetch(`${stack.url}/v1/keys`, {
    method: 'POST',
    headers: adminHeaders,
    body: JSON.stringify({ name: 'bench', scopes: ['enqueue'] }),
  });
  if (response.status !== 201) throw new Error(`create key: ${response.status} ${await response.text()}`);
  return ((await response.json()) as { secret: string }).secret;
}

async function enqueues(target: Target, requests: number, latencies: number[]): Promise<void> {
  for (let i = 0; i < requests; i++) {
    const sent = performance.now();
    const response = await fetch(`${target.stack.url}/v1/queues/bench-api-key/jobs`, {
      method: 'POST',
      headers: { ...adminHeaders, authorization: target.authorization },
      body: JSON.stringify({ type: 'noop' }),
    });
    const answer = await response.text();
    latencies.push(performance.now() - sent);
    if (response.status !== 201) throw new Error(`enqueue: ${response.status} ${answer}`);
  }
}

function round(value: number): number {
  return Math.round(value * 10) / 10;
}

await main();
