import { describe, expect, it } from 'vitest';
import { cleanStrings, eventLine, hasHostileText } from './sanitize.js';

describe('sanitize', () => {
  it('sanitize - NUL and lone surrogates anywhere become U+FFFD, keys included', () => {
    const dirty = { name: 'a\0b', list: ['x\ud800y', { 'k\0': '\udc00' }], ok: 'fine 🦔', n: 1, t: true, z: null };
    expect(cleanStrings(dirty)).toEqual({ name: 'a\ufffdb', list: ['x\ufffdy', { 'k\ufffd': '\ufffd' }], ok: 'fine 🦔', n: 1, t: true, z: null });
    const line = eventLine(dirty);
    expect(hasHostileText(line)).toBe(false);
    expect(JSON.parse(line)).toEqual(cleanStrings(dirty));
  });

  it('sanitize - clean events are written as they are, including escapes that are not hostile', () => {
    const clean = { text: 'tab\there, quote " and a literal backslash-u: \\u0000', emoji: '🦔', ctrl: '\u0001' };
    expect(eventLine(clean)).toBe(JSON.stringify(clean) + '\n');
    expect(hasHostileText(JSON.stringify({ a: '\u0000' }))).toBe(true);
    expect(hasHostileText(JSON.stringify({ a: '\ud83e' }))).toBe(true);
    expect(hasHostileText(JSON.stringify({ a: '\u0001' }))).toBe(false);
  });
});
