/**
 * The network between a Worker and Neon, played by the local proxy so the
 * Worker path can be run and measured with its database a round trip away.
 * SQL over HTTP waits the whole round trip before it runs; the WebSocket pipe
 * delays each message by half of it, each way, in order.
 */
export interface NetworkDelay {
  /** The round trip, in milliseconds: half of it each way. */
  roundTripMs: number;
  /** Up to this many milliseconds more each way, drawn at random for each request or message. */
  jitterMs: number;
}

export const NO_NETWORK_DELAY: NetworkDelay = { roundTripMs: 0, jitterMs: 0 };

/** Whether the proxy delays anything: with none, it hands everything on at once. */
export function delays(delay: NetworkDelay): boolean {
  return delay.roundTripMs > 0 || delay.jitterMs > 0;
}

/** One way across: half the round trip and a draw of the jitter. */
export function oneWayMs(delay: NetworkDelay): number {
  return delay.roundTripMs / 2 + Math.random() * delay.jitterMs;
}

/**
 * One direction of a connection: each thing sent is delivered one way later,
 * never before the one sent ahead of it (jitter reorders nothing, as on a TCP
 * connection). With no delay it delivers at once.
 */
export function delayLine(delay: NetworkDelay): (deliver: () => void) => void {
  if (!delays(delay)) return (deliver) => deliver();
  const inFlight: Array<{ due: number; deliver: () => void }> = [];
  let waiting = false;
  const waitForNext = (): void => {
    waiting = true;
    setTimeout(deliverDue, inFlight[0]!.due - performance.now());
  };
  const deliverDue = (): void => {
    waiting = false;
    while (inFlight.length > 0 && inFlight[0]!.due <= performance.now()) inFlight.shift()!.deliver();
    if (inFlight.length > 0) waitForNext();
  };
  return (deliver) => {
    const due = Math.max(inFlight.at(-1)?.due ?? 0, performance.now() + oneWayMs(delay));
    inFlight.push({ due, deliver });
    if (!waiting) waitForNext();
  };
}

/**
 * Reads a round trip and its jitter from the environment
 * (NEON_PROXY_ROUND_TRIP_MS, NEON_PROXY_JITTER_MS), each a number of
 * milliseconds from 0 to 10,000; unset is 0.
 */
export function networkDelayFrom(env: NodeJS.ProcessEnv): NetworkDelay {
  return {
    roundTripMs: milliseconds(env, 'NEON_PROXY_ROUND_TRIP_MS'),
    jitterMs: milliseconds(env, 'NEON_PROXY_JITTER_MS'),
  };
}

function milliseconds(env: NodeJS.ProcessEnv, variable: string): number {
  const value = env[variable]?.trim();
  if (!value) return 0;
  const ms = Number(value);
  if (!Number.isFinite(ms) || ms < 0 || ms > 10_000) {
    throw new Error(`${variable} must be a number of milliseconds from 0 to 10000, not "${value}"`);
  }
  return ms;
}
