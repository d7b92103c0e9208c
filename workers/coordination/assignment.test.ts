import { describe, expect, it } from 'vitest';
import { assignShards } from './assignment.js';

function check(members: string[], shards: number) {
  const a = assignShards(members, shards);
  const all = [...a.values()].flat().sort((x, y) => x - y);
  expect(all).toEqual(Array.from({ length: shards }, (_, i) => i));
  const sizes = [...a.values()].map((s) => s.length);
  expect(Math.max(...sizes) - Math.min(...sizes)).toBeLessThanOrEqual(1);
  return a;
}

describe('shard assignment', () => {
  it('assignment - every shard exactly once, balanced within one, for 1 to 7 members', () => {
    for (let n = 1; n <= 7; n++) check(Array.from({ length: n }, (_, i) => `w${i}`), 16);
    check(['a', 'b', 'c'], 5);
    expect(check(Array.from({ length: 20 }, (_, i) => `w${i}`), 16).get('w0')!.length).toBeLessThanOrEqual(1);
  });

  it('assignment - the same members give the same answer in any order (every worker agrees)', () => {
    expect(assignShards(['b', 'a', 'c'], 16)).toEqual(assignShards(['c', 'b', 'a', 'a'], 16));
  });

  it('assignment - a joining worker takes shards without reshuffling the rest', () => {
    const before = assignShards(['w1', 'w2', 'w3'], 16);
    const after = assignShards(['w1', 'w2', 'w3', 'w4'], 16);
    let moved = 0;
    for (const m of ['w1', 'w2', 'w3']) moved += before.get(m)!.filter((s) => !after.get(m)!.includes(s)).length;
    // w4 needs 4 shards; a full reshuffle would move about 12.
    expect(moved).toBeLessThanOrEqual(6);
    expect(after.get('w4')!.length).toBe(4);
  });

  it('assignment - no members, no assignment', () => {
    expect(assignShards([], 16).size).toBe(0);
  });
});
