/**
 * The rate limit binding of Workers (`[[ratelimits]]` in wrangler config):
 * a counter per key, shared by the isolates of one Cloudflare location.
 */
export interface RateLimiterBinding {
  limit(options: { key: string }): Promise<{ success: boolean }>;
}

/** Failed authentications a client may make per window before it is turned away. */
export const FAILED_AUTHENTICATIONS_PER_WINDOW = 10;
export const FAILED_AUTHENTICATIONS_WINDOW_SECONDS = 60;
/** Clients remembered at once: past it the oldest are forgotten, so memory stays bounded. */
const MAX_CLIENTS = 10_000;

interface ClientFailures {
  windowStartMs: number;
  failures: number;
  /** Turned away until then. */
  blockedUntilMs: number;
}

/**
 * Failed authentications (an unknown or revoked key, a bad status token)
 * per client address. A client past the limit is turned away, whatever it
 * presents, until its window ends. Keys are 256 random bits, so this is not
 * what stops guessing; it stops a client from making the database look up
 * keys without end, and it keeps the log readable.
 *
 * The count lives in this isolate's memory, and a Worker runs in many
 * isolates in many locations: alone it is weak. With a rate limit binding
 * (AUTH_RATE_LIMITER) every failure is also counted there, across the
 * isolates of a location, and its refusal turns the client away here too.
 */
export class FailedAuthentications {
  private readonly clients = new Map<string, ClientFailures>();

  /** Seconds until `client` may try again, or undefined when it may now. */
  retryAfterSeconds(client: string, nowMs = Date.now()): number | undefined {
    const entry = this.clients.get(client);
    if (entry === undefined || entry.blockedUntilMs <= nowMs) return undefined;
    return Math.ceil((entry.blockedUntilMs - nowMs) / 1000);
  }

  async recordFailure(client: string, binding: RateLimiterBinding | undefined, nowMs = Date.now()): Promise<void> {
    const windowMs = FAILED_AUTHENTICATIONS_WINDOW_SECONDS * 1000;
    let entry = this.clients.get(client);
    if (entry === undefined || nowMs - entry.windowStartMs >= windowMs) {
      entry = { windowStartMs: nowMs, failures: 0, blockedUntilMs: 0 };
    }
    entry.failures += 1;
    const overHere = entry.failures >= FAILED_AUTHENTICATIONS_PER_WINDOW;
    const overThere =
      binding !== undefined && !(await binding.limit({ key: `skiplock-failed-auth:${client}` })).success;
    if (overHere || overThere) entry.blockedUntilMs = entry.windowStartMs + windowMs;
    // Delete then set: the map's order is the order clients were last seen in, oldest first.
    this.clients.delete(client);
    this.clients.set(client, entry);
    if (this.clients.size > MAX_CLIENTS) this.clients.delete(this.clients.keys().next().value!);
  }
}
