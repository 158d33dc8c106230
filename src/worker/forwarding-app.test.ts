import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import type { AppEnv } from '../http/context.js';
import { forwardingApp } from './forwarding-app.js';

/** A load that fails its first time (a module that did not evaluate) and gives the app after. */
function failingOnce(): { load: () => Promise<Hono<AppEnv>>; calls: () => number } {
  let calls = 0;
  const app = new Hono<AppEnv>().get('/hello', (c) => c.text('hello'));
  return {
    load: async () => {
      calls += 1;
      if (calls === 1) throw new Error('the API did not load');
      return app;
    },
    calls: () => calls,
  };
}

describe('forwardingApp', () => {
  it('tries a failed load again with the next request when called itself', async () => {
    const { load, calls } = failingOnce();
    const forwarder = forwardingApp(load);
    await expect(forwarder.request('/hello')).rejects.toThrow('the API did not load');
    const response = await forwarder.request('/hello');
    expect(await response.text()).toBe('hello');
    expect(calls()).toBe(2);
  });

  it('tries a failed load again with the next request when mounted, and then keeps the mounted app', async () => {
    const { load, calls } = failingOnce();
    const host = new Hono<AppEnv>().route('/queue', forwardingApp(load));
    host.onError((error, c) => c.text(error.message, 503));
    const failed = await host.request('/queue/hello');
    expect([failed.status, await failed.text()]).toEqual([503, 'the API did not load']);
    for (let i = 0; i < 2; i++) {
      const response = await host.request('/queue/hello');
      expect([response.status, await response.text()]).toEqual([200, 'hello']);
    }
    expect(calls()).toBe(2);
  });
});
