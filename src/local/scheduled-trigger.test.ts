import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { NUDGE_PATH, startScheduledTrigger, type ScheduledTrigger } from './scheduled-trigger';

interface Arrival {
  at: number;
  method: string;
  path: string;
}

/**
 * A stand-in for `wrangler dev`'s front door that behaves as its lost-race
 * case does: the first scheduled request is held, unanswered, until some
 * other request arrives (cloudflare/workers-sdk#14641).
 */
async function serverHoldingFirstFiring(): Promise<{
  url: string;
  arrivals: Arrival[];
  answered: () => number;
  close(): Promise<void>;
}> {
  const arrivals: Arrival[] = [];
  let held: ServerResponse | undefined;
  let holdNext = true;
  let answered = 0;
  const answer = (response: ServerResponse) => {
    answered += 1;
    response.end('ok');
  };
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const path = new URL(request.url!, 'http://x').pathname;
    arrivals.push({ at: Date.now(), method: request.method!, path });
    if (held !== undefined) {
      answer(held);
      held = undefined;
    }
    if (path !== '/cdn-cgi/handler/scheduled') {
      response.statusCode = 404;
      response.end();
    } else if (holdNext) {
      holdNext = false;
      held = response;
    } else {
      answer(response);
    }
  });
  server.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    arrivals,
    answered: () => answered,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('the local cron trigger', () => {
  let trigger: ScheduledTrigger | undefined;
  afterEach(() => trigger?.stop());

  it('sets a firing that wrangler dev left unanswered going again at the next one, and fires on', async () => {
    const server = await serverHoldingFirstFiring();
    const logged: string[] = [];
    try {
      trigger = startScheduledTrigger(server.url, { crons: ['* * * * *'], everySeconds: 1 }, (line) =>
        logged.push(line),
      );
      for (let waited = 0; server.answered() < 4 && waited < 10_000; waited += 100) await sleep(100);

      const firings = server.arrivals.filter((arrival) => arrival.path === '/cdn-cgi/handler/scheduled');
      const nudges = server.arrivals.filter((arrival) => arrival.path === NUDGE_PATH);
      expect(server.answered()).toBeGreaterThanOrEqual(4);
      // The held firing was released by a nudge, not by a second firing piled on top of it.
      expect(nudges[0]?.method).toBe('HEAD');
      expect(nudges[0]!.at).toBeLessThan(firings[1]!.at);
      expect(logged).toEqual([]);
    } finally {
      trigger?.stop();
      await server.close();
    }
  });

  it('does not fire exactly one period apart, which keeps phase with wrangler dev 5 s idle timeouts', async () => {
    const server = await serverHoldingFirstFiring();
    try {
      trigger = startScheduledTrigger(server.url, { crons: ['* * * * *'], everySeconds: 1 }, () => {});
      for (let waited = 0; server.answered() < 8 && waited < 15_000; waited += 100) await sleep(100);
      const firings = server.arrivals
        .filter((arrival) => arrival.path === '/cdn-cgi/handler/scheduled')
        .map((arrival) => arrival.at);
      const offsets = firings.map((at) => at % 1000);
      expect(firings.length).toBeGreaterThanOrEqual(8);
      // Each waits a random part of a tenth of the period (here up to 100 ms) past its second;
      // without that, croner fires within a few ms of it.
      expect(Math.max(...offsets) - Math.min(...offsets)).toBeGreaterThan(20);
    } finally {
      trigger?.stop();
      await server.close();
    }
  });
});
