import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { readSettings, setting } from './setting.js';
import { list, number, oneOf, onOff, secondsAsMilliseconds, text, wholeNumber } from './setting-kinds.js';
import { SHARED_SETTINGS } from './settings.js';

const PLAN_CAPS = { small: 5, large: 50 } as const;

const GROUP = {
  size: setting({ variable: 'SIZE', kind: wholeNumber({ min: 1, max: 50 }), default: 25, description: 'a size' }),
  ratio: setting({ variable: 'RATIO', kind: number({ min: 0 }), default: 0.5, description: 'a ratio' }),
  fast: setting({ variable: 'FAST', kind: onOff(), default: true, description: 'a switch' }),
  plan: setting({ variable: 'PLAN', kind: oneOf(['small', 'large']), default: 'small', description: 'a plan' }),
  cap: setting({
    variable: 'CAP',
    kind: wholeNumber({ min: 1 }),
    defaultFrom: { shown: "the plan's", of: (values) => PLAN_CAPS[values.plan as 'small' | 'large'] },
    description: 'follows the plan',
  }),
  hosts: setting({
    variable: 'HOSTS',
    kind: list(() => z.string().regex(/^[a-z.]+$/), 'names, comma-separated'),
    unset: 'none',
    description: 'a list',
  }),
  grace: setting({
    variable: 'GRACE_SECONDS',
    kind: secondsAsMilliseconds({ min: 0, max: 60 }),
    default: 20_000,
    description: 'a grace',
  }),
  name: setting({ variable: 'NAME', kind: text('a name'), unset: 'none', description: 'a name' }),
  hidden: setting({ variable: 'HIDDEN', kind: onOff(), default: false, option: false, description: 'a variable only' }),
};

describe('readSettings', () => {
  it('gives each setting its default when neither its option nor its variable is set, or the variable is blank', () => {
    expect(readSettings(GROUP, { SIZE: '  ', NAME: '' })).toEqual({
      size: 25,
      ratio: 0.5,
      fast: true,
      plan: 'small',
      cap: 5,
      hosts: undefined,
      grace: 20_000,
      name: undefined,
      hidden: false,
    });
  });

  it('reads each variable as its kind spells it: numbers, switch words in any case, choices, lists, seconds', () => {
    const values = readSettings(GROUP, {
      SIZE: ' 50 ',
      RATIO: '0.25',
      FAST: 'OFF',
      PLAN: 'Large',
      HOSTS: ' a.example , ,b.example,',
      GRACE_SECONDS: '1.5',
      NAME: ' pod-7 ',
      HIDDEN: 'true',
    });
    expect(values).toEqual({
      size: 50,
      ratio: 0.25,
      fast: false,
      plan: 'large',
      cap: 50,
      hosts: ['a.example', 'b.example'],
      grace: 1500,
      name: 'pod-7',
      hidden: true,
    });
    // A wrangler var may be a JSON number or boolean.
    expect(readSettings(GROUP, { SIZE: 7, FAST: false })).toMatchObject({ size: 7, fast: false });
  });

  it('refuses, in one line naming the variable and what it accepts, a value its kind cannot take', () => {
    const refusal = (env: Record<string, string>) => () => readSettings(GROUP, env);
    expect(refusal({ SIZE: 'lots' })).toThrow(/^SIZE must be a whole number from 1 to 50, not "lots"$/);
    expect(refusal({ SIZE: '2.5' })).toThrow('SIZE must be a whole number from 1 to 50, not "2.5"');
    expect(refusal({ SIZE: '51' })).toThrow('SIZE must be a whole number from 1 to 50, not "51"');
    expect(refusal({ RATIO: '-1' })).toThrow('RATIO must be a number from 0, not "-1"');
    expect(refusal({ RATIO: 'Infinity' })).toThrow('RATIO must be a number from 0, not "Infinity"');
    expect(refusal({ FAST: 'maybe' })).toThrow('FAST must be on or off (also 1 or 0, true or false), not "maybe"');
    expect(refusal({ PLAN: 'huge' })).toThrow('PLAN must be small or large, not "huge"');
    expect(refusal({ CAP: '0' })).toThrow('CAP must be a whole number from 1, not "0"');
    expect(refusal({ HOSTS: 'a.example,B_AD' })).toThrow('HOSTS must be names, comma-separated, not "B_AD"');
    expect(refusal({ GRACE_SECONDS: '61' })).toThrow('GRACE_SECONDS must be a number from 0 to 60, not "61"');
  });

  it('takes options over variables, and checks them with the same kinds, naming the option', () => {
    const env = { SIZE: '10', PLAN: 'large', FAST: 'off', HIDDEN: 'on' };
    const options = { size: 40, fast: true, hosts: [' a.example ', ''], grace: 500, name: ' pod-8 ' };
    expect(readSettings(GROUP, env, options)).toMatchObject({
      size: 40,
      plan: 'large',
      cap: 50,
      fast: true,
      hosts: ['a.example'],
      grace: 500,
      name: 'pod-8',
      hidden: true,
    });
    expect(readSettings(GROUP, env, { cap: 3 }).cap).toBe(3);
    expect(() => readSettings(GROUP, env, { size: 80 })).toThrow(/^size must be a whole number from 1 to 50, not 80$/);
    // @ts-expect-error -- a plan is small or large: this must not compile, and is refused when it runs anyway.
    expect(() => readSettings(GROUP, {}, { plan: 'huge' })).toThrow('plan must be small or large, not "huge"');
    expect(() => readSettings(GROUP, {}, { hosts: ['a.example', 'B_AD'] })).toThrow(
      'hosts must be names, comma-separated, not "B_AD"',
    );
    expect(() => readSettings(GROUP, {}, { grace: 61_000 })).toThrow(
      'grace must be a number from 0 to 60000 (milliseconds), not 61000',
    );
  });

  it('types each setting by its kind alone', () => {
    const wrong = setting({
      variable: 'WRONG',
      kind: wholeNumber({ min: 1 }),
      // @ts-expect-error -- a whole number's default is a number: this must not compile.
      default: 'many',
      description: 'mistyped',
    });
    expect(wrong.kind.fromCode.safeParse(wrong.default).success).toBe(false);
  });

  it('turns dev mode on for SKIPLOCK_DEV=1 only, and refuses a word it would once have read as off', () => {
    expect(readSettings(SHARED_SETTINGS, { SKIPLOCK_DEV: '1' }).devMode).toBe(true);
    expect(readSettings(SHARED_SETTINGS, { SKIPLOCK_DEV: '0' }).devMode).toBe(false);
    expect(readSettings(SHARED_SETTINGS, {}).devMode).toBe(false);
    expect(() => readSettings(SHARED_SETTINGS, { SKIPLOCK_DEV: 'true' })).toThrow(
      'SKIPLOCK_DEV must be 1 or 0, not "true"',
    );
  });
});
