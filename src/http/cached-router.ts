import type { Result, Router } from 'hono/router';
import { TrieRouter } from 'hono/router/trie-router';

/** Answers remembered; a full cache starts over, so a stream of distinct paths (job ids) holds no more. */
const REMEMBERED = 1000;

/**
 * Hono's trie router, remembering its answer per method and path: most
 * requests repeat a path (an enqueue names its queue), and looking one up
 * costs far less than matching it against every route. Hono's faster
 * RegExpRouter refuses the API's paths (`/v1/jobs/bulk/…` beside
 * `/v1/jobs/:id/…`), which are public and stay.
 */
export class CachedTrieRouter<T> implements Router<T> {
  readonly name = 'CachedTrieRouter';
  readonly #trie = new TrieRouter<T>();
  readonly #answers = new Map<string, Result<T>>();

  add(method: string, path: string, handler: T): void {
    this.#answers.clear();
    this.#trie.add(method, path, handler);
  }

  match(method: string, path: string): Result<T> {
    const key = `${method} ${path}`;
    let answer = this.#answers.get(key);
    if (answer === undefined) {
      if (this.#answers.size >= REMEMBERED) this.#answers.clear();
      answer = this.#trie.match(method, path);
      this.#answers.set(key, answer);
    }
    return answer;
  }
}
