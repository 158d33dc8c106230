import type { Db, Query, Row } from '../db/types.js';

/**
 * The connections an invocation may hold open at once (Workers: 6, shared
 * by fetches, sockets and the Neon HTTP statements), counted rather than
 * guessed, so a drain can run more jobs than connections when its jobs
 * mostly wait. One connection is kept for the drain's own statements:
 * a heartbeat never waits behind handlers' fetches, only behind another
 * statement.
 */
export class ConnectionGate {
  private open = 0;
  private readonly waiting: { forHandler: boolean; enter: () => void }[] = [];

  /** @param size connections open at once; at least 2 (one kept for the drain). */
  constructor(readonly size: number) {
    if (!(Number.isInteger(size) && size >= 2))
      throw new RangeError(`a connection gate needs at least 2 connections, not ${size}`);
  }

  /** The same database, each statement holding one of the drain's connections while it runs (Neon HTTP: a fetch each). */
  statements(db: Db): Db {
    const through = async <T>(send: () => Promise<T>): Promise<T> => {
      const release = await this.enter(false);
      try {
        return await send();
      } finally {
        release();
      }
    };
    return {
      query: <R = Row>(query: Query) => through(() => db.query<R>(query)),
      transaction: (queries: readonly Query[]) => through(() => db.transaction(queries)),
      close: () => db.close(),
    };
  }

  /** Waits for a connection; returns its release (safe to call twice). */
  async enter(forHandler: boolean): Promise<() => void> {
    if (!this.mayEnter(forHandler)) await new Promise<void>((enter) => this.waiting.push({ forHandler, enter }));
    else this.open += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.open -= 1;
      this.admitNext();
    };
  }

  private mayEnter(forHandler: boolean): boolean {
    return this.open < (forHandler ? this.size - 1 : this.size);
  }

  /** The drain's statements first, then handlers in arrival order. */
  private admitNext(): void {
    const index = this.waiting.findIndex((waiter) => !waiter.forHandler);
    const next = index >= 0 ? index : this.waiting.findIndex((waiter) => this.mayEnter(waiter.forHandler));
    if (next < 0 || !this.mayEnter(this.waiting[next]!.forHandler)) return;
    const [waiter] = this.waiting.splice(next, 1);
    this.open += 1;
    waiter!.enter();
  }
}

/**
 * The response, with its connection released once its body has been read to
 * the end, has failed or was cancelled (a connection stays open while a body
 * streams). Without a body, at once.
 */
export function releasedWhenRead(response: Response, release: () => void): Response {
  if (response.body === null) {
    release();
    return response;
  }
  const reader = response.body.getReader();
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          release();
          controller.close();
        } else {
          controller.enqueue(value);
        }
      } catch (error) {
        release();
        controller.error(error);
      }
    },
    async cancel(reason) {
      release();
      await reader.cancel(reason);
    },
  });
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}
