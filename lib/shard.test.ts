import { describe, expect, it } from 'vitest';
import { fnv1a32, shardOf } from './shard.js';

function reference(text: string): number {
  let h = 0x811c9dc5;
  for (const b of new TextEncoder().encode(text)) h = Math.imul(h ^ b, 0x01000193);
  return h >>> 0;
}

describe('shard', () => {
  it('shard - matches FNV-1a over UTF-8 bytes, including multi-byte and astral characters', () => {
    for (const s of ['', 'a', 'foobar', 'user-123', 'é', '日本語', '🦔 hog', '\ud800 lone', 'x'.repeat(300)]) {
      expect(fnv1a32(s)).toBe(reference(s));
    }
  });

  it('shard - known vectors stay fixed (public contract)', () => {
    expect(fnv1a32('')).toBe(0x811c9dc5);
    expect(fnv1a32('a')).toBe(0xe40c292c);
    expect(fnv1a32('foobar')).toBe(0xbf9cf968);
  });

  it('shard - spreads ids over every shard', () => {
    const seen = new Set<number>();
    for (let i = 0; i < 1000; i++) seen.add(shardOf(`user-${i}`, 16));
    expect(seen.size).toBe(16);
  });
});
