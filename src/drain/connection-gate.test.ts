import { describe, expect, it } from 'vitest';
import { ConnectionGate } from './connection-gate';

describe('ConnectionGate', () => {
  it('lets handlers hold all connections but one, which a statement can always get', async () => {
    const gate = new ConnectionGate(3);
    const handlers = [await gate.enter(true), await gate.enter(true)];
    let third = false;
    const waitingHandler = gate.enter(true).then((release) => {
      third = true;
      return release;
    });

    const statement = await gate.enter(false);
    await Promise.resolve();
    expect(third).toBe(false);

    statement();
    await Promise.resolve();
    expect(third).toBe(false);
    handlers[0]!();
    (await waitingHandler)();
    expect(third).toBe(true);
  });

  it('admits a waiting statement before waiting handlers, and a release counts once', async () => {
    const gate = new ConnectionGate(3);
    const first = await gate.enter(false);
    const handler = await gate.enter(true);
    const second = await gate.enter(false);
    const order: string[] = [];
    const laterHandler = gate.enter(true).then((release) => {
      order.push('handler');
      return release;
    });
    const laterStatement = gate.enter(false).then((release) => {
      order.push('statement');
      return release;
    });

    first();
    first();
    const statement = await laterStatement;
    second();
    await Promise.resolve();
    expect(order).toEqual(['statement']);
    statement();
    (await laterHandler)();
    handler();

    expect(order).toEqual(['statement', 'handler']);
  });

  it('refuses a gate of fewer than 2 connections', () => {
    expect(() => new ConnectionGate(1)).toThrow(/at least 2 connections/);
  });
});
