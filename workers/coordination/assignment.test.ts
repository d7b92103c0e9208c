import { describe, expect, it } from 'vitest';
import { assignBalanced, assignShards } from './assignment.js';

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

  it('assignment - names of another lease set are spread the same way: each once, balanced, the same answer for every worker', () => {
    const names = Array.from({ length: 11 }, (_, i) => `export-${i}`);
    const a = assignBalanced(['w2', 'w1', 'w3'], names);
    expect([...a.values()].flat().sort()).toEqual([...names].sort());
    expect([...a.values()].map((n) => n.length).sort()).toEqual([3, 4, 4]);
    expect(assignBalanced(['w3', 'w1', 'w2'], [...names].reverse())).toEqual(a);
    // Shard numbers given as names land where assignShards puts them.
    const shards = assignShards(['w1', 'w2', 'w3'], 16);
    const named = assignBalanced(['w1', 'w2', 'w3'], Array.from({ length: 16 }, (_, i) => String(i)));
    for (const m of ['w1', 'w2', 'w3']) expect(named.get(m)!.map(Number).sort((x, y) => x - y)).toEqual(shards.get(m));
  });
});
