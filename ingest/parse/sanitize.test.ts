import { describe, expect, it } from 'vitest';
import { cleanStrings, hasHostileText } from '../../lib/index.js';
import { eventJson } from './sanitize.js';

describe('event lines', () => {
  it('sanitize - an event with NUL or lone surrogates is written cleaned', () => {
    const dirty = { name: 'a\0b', list: ['x\ud800y', { 'k\0': '\udc00' }], ok: 'fine 🦔' };
    const line = eventJson(dirty);
    expect(hasHostileText(line)).toBe(false);
    expect(JSON.parse(line)).toEqual(cleanStrings(dirty));
  });

  it('sanitize - clean events are written as they are, including escapes that are not hostile', () => {
    const clean = { text: 'tab\there, quote " and a literal backslash-u: \\u0000', emoji: '🦔', ctrl: '\u0001' };
    expect(eventJson(clean)).toBe(JSON.stringify(clean));
  });
});
