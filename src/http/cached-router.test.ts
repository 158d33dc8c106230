import { describe, expect, it } from 'vitest';
import { CachedTrieRouter } from './cached-router.js';

describe('CachedTrieRouter', () => {
  it('answers a repeated path as the trie router does, each path with its own parameters', () => {
    const router = new CachedTrieRouter<string>();
    router.add('ALL', '*', 'middleware');
    router.add('POST', '/v1/jobs/bulk/cancel', 'bulk');
    router.add('POST', '/v1/jobs/:id/cancel', 'one');
    const handlers = (path: string) => router.match('POST', path)[0].map(([handler, params]) => [handler, params]);

    expect(handlers('/v1/jobs/j1/cancel')).toEqual([
      ['middleware', {}],
      ['one', { id: 'j1' }],
    ]);
    expect(handlers('/v1/jobs/j2/cancel')).toEqual([
      ['middleware', {}],
      ['one', { id: 'j2' }],
    ]);
    expect(handlers('/v1/jobs/j1/cancel')).toEqual(handlers('/v1/jobs/j1/cancel'));
    expect(handlers('/v1/jobs/bulk/cancel').map(([handler]) => handler)).toContain('bulk');
  });

  it('forgets its answers when a route is added', () => {
    const router = new CachedTrieRouter<string>();
    router.add('GET', '/a', 'first');
    expect(router.match('GET', '/b')[0]).toEqual([]);
    router.add('GET', '/b', 'second');
    expect(router.match('GET', '/b')[0].map(([handler]) => handler)).toEqual(['second']);
  });
});
