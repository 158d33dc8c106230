import { describe, expect, it } from 'vitest';
import { afterAnswer } from '../../../src/worker/after-answer';

describe('afterAnswer', () => {
  it('holds the work in waitUntil and starts it only after what the request still had to do', async () => {
    const held: Array<Promise<unknown>> = [];
    const order: string[] = [];

    afterAnswer({ waitUntil: (promise) => void held.push(promise) }, async () => void order.push('work'));
    // What the request does after the call (signing, rendering the answer) runs in microtasks.
    await Promise.resolve().then(() => order.push('answer'));

    expect(held).toHaveLength(1);
    expect(order).toEqual(['answer']);
    await held[0];
    expect(order).toEqual(['answer', 'work']);
  });
});
