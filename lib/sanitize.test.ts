import { describe, expect, it } from 'vitest';
import { cleanString, cleanStrings, hasHostileText } from './sanitize.js';

describe('sanitize', () => {
  it('sanitize - NUL and lone surrogates anywhere become U+FFFD, keys included', () => {
    const dirty = { name: 'a\0b', list: ['x\ud800y', { 'k\0': '\udc00' }], ok: 'fine 🦔', n: 1, t: true, z: null };
    expect(cleanStrings(dirty)).toEqual({ name: 'a\ufffdb', list: ['x\ufffdy', { 'k\ufffd': '\ufffd' }], ok: 'fine 🦔', n: 1, t: true, z: null });
    expect(hasHostileText(JSON.stringify(cleanStrings(dirty)))).toBe(false);
  });

  it('sanitize - NUL characters in plain text (log lines) become U+FFFD so PostgreSQL can store it', () => {
    expect(cleanString('a\u0000b')).toBe('a\uFFFDb');
    expect(cleanString('plain ✓')).toBe('plain ✓');
  });

  it('sanitize - a "__proto__" key stays a key: it never becomes the prototype of the copy', () => {
    const parsed = JSON.parse('{"__proto__":{"$set":{"x":1}},"a":"\\u0000"}') as Record<string, unknown>;
    const clean = cleanStrings(parsed) as Record<string, unknown>;
    expect(Object.getPrototypeOf(clean)).toBe(Object.prototype);
    expect(clean.$set).toBeUndefined();
    expect(Object.keys(clean)).toEqual(['__proto__', 'a']);
  });

  it('sanitize - hostile escapes are found in any case; harmless ones are not', () => {
    expect(hasHostileText(JSON.stringify({ a: '\u0000' }))).toBe(true);
    expect(hasHostileText(JSON.stringify({ a: '\ud83e' }))).toBe(true);
    expect(hasHostileText('{"a":"\\uD83E"}')).toBe(true);
    expect(hasHostileText(JSON.stringify({ a: '\u0001' }))).toBe(false);
    expect(hasHostileText(JSON.stringify({ a: 'tab\there 🦔' }))).toBe(false);
  });
});
