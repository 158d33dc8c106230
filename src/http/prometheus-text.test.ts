import { describe, expect, it } from 'vitest';
import { escapeLabelValue } from './prometheus-text.js';

describe('escapeLabelValue', () => {
  it('escapes backslash, double quote and line feed, in that order', () => {
    expect(escapeLabelValue('a\\b"c\nd')).toBe('a\\\\b\\"c\\nd');
  });
});
