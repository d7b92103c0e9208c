// Which worker should hold which lease (a shard, or a name of another lease set): rendezvous
// hashing with bounded load. Every worker computes the same answer from the same member list;
// leases move only as far as balance needs when a worker joins or leaves; no worker gets more
// than ceil(leases / members).
import { fnv1a32 } from '../../lib/index.js';

/** A well-mixed 32-bit score of (member, key) (fnv1a alone mixes short inputs poorly). */
function score(member: string, key: string | number): number {
  let h = fnv1a32(`${member}\u0000${key}`);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * Spreads `keys` over `members`: each key goes to the member that scores highest for it among
 * those with room, and no member gets more than ceil(keys / members). Keys are shard numbers or
 * the names of another lease set (coordination/lease-coordinator.ts).
 */
export function assignBalanced<K extends string | number>(members: readonly string[], keys: readonly K[]): Map<string, K[]> {
  const sorted = [...new Set(members)].sort();
  const out = new Map<string, K[]>(sorted.map((m) => [m, []]));
  if (sorted.length === 0) return out;
  const unique = [...new Set(keys)];
  const floor = Math.floor(unique.length / sorted.length);
  let bigOnes = unique.length % sorted.length; // members that may take floor + 1
  const pairs: { member: string; key: K; score: number }[] = [];
  for (const key of unique) {
    for (const member of sorted) pairs.push({ member, key, score: score(member, key) });
  }
  pairs.sort((a, b) => b.score - a.score || compare(a.member, b.member) || compare(a.key, b.key));
  const taken = new Set<K>();
  for (const { member, key } of pairs) {
    if (taken.has(key)) continue;
    const mine = out.get(member)!;
    if (mine.length < floor || (mine.length === floor && bigOnes > 0)) {
      if (mine.length === floor) bigOnes--;
      mine.push(key);
      taken.add(key);
    }
  }
  for (const list of out.values()) list.sort(compare);
  return out;
}

/** Shards 0..shardCount-1 spread over the members. */
export function assignShards(members: readonly string[], shardCount: number): Map<string, number[]> {
  return assignBalanced(members, Array.from({ length: shardCount }, (_, shard) => shard));
}

/** Numbers by value, strings by code unit. */
function compare<T extends string | number>(a: T, b: T): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
