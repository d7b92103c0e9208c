import LZString from 'lz-string';
import { describe, expect, it } from 'vitest';
import { lzBombLength, lzStringBomb } from '../../test/lz-string-bomb.js';
import { lzStringBase64Size } from './lz-string-size.js';

const samples = [
  'a',
  '{"event":"e","distinct_id":"d"}',
  JSON.stringify({ api_key: 'phc_k', batch: Array.from({ length: 300 }, (_, i) => ({ event: `e${i % 9}`, distinct_id: `user-${i % 13}`, properties: { i, s: 'ünïcödé' } })) }),
  'é€😀 mixed widths: ascii, 2-byte é, 3-byte €, a surrogate pair 😀',
  'x'.repeat(100_000),
  Array.from({ length: 5000 }, (_, i) => String.fromCharCode(32 + ((i * 7919) % 30000))).join(''),
];

describe('lz-string size', () => {
  it('lz-string size - equals the UTF-8 length of what lz-string decompresses', () => {
    for (const text of samples) {
      expect(lzStringBase64Size(LZString.compressToBase64(text), Number.MAX_SAFE_INTEGER)).toEqual({ kind: 'ok', bytes: Buffer.byteLength(text) });
    }
  });

  it('lz-string size - truncated or empty streams are invalid, as lz-string finds them', () => {
    const full = LZString.compressToBase64(samples[2]!);
    for (const cut of [0, 1, 5, 100, full.length - 40]) {
      expect(LZString.decompressFromBase64(full.slice(0, cut)) || null).toBeNull();
      expect(lzStringBase64Size(full.slice(0, cut), Number.MAX_SAFE_INTEGER)).toEqual({ kind: 'invalid' });
    }
  });

  it('lz-string size - a bomb is found over the limit after reading only as much as the limit allows', () => {
    const bomb = lzStringBomb(' ', 100_000); // ~5·10⁹ characters from 280 KB
    expect(lzBombLength(100_000)).toBeGreaterThan(5e9);
    const started = performance.now();
    expect(lzStringBase64Size(bomb, 100 * 1024 * 1024)).toEqual({ kind: 'over_limit' });
    expect(performance.now() - started).toBeLessThan(1000);
    // The same bomb, sized: no output is built for it either.
    expect(lzStringBase64Size(lzStringBomb(' ', 1000), Number.MAX_SAFE_INTEGER)).toEqual({ kind: 'ok', bytes: lzBombLength(1000) });
  });

  it('lz-string size - counts bytes, not UTF-16 units: 3 per €, 4 per surrogate pair', () => {
    expect(lzStringBase64Size(lzStringBomb('€', 100), Number.MAX_SAFE_INTEGER)).toEqual({ kind: 'ok', bytes: 3 * lzBombLength(100) });
    expect(lzStringBase64Size(LZString.compressToBase64('😀'.repeat(10)), Number.MAX_SAFE_INTEGER)).toEqual({ kind: 'ok', bytes: 40 });
    expect(lzStringBase64Size(lzStringBomb('€', 100), 3 * lzBombLength(100) - 1)).toEqual({ kind: 'over_limit' });
  });
});
