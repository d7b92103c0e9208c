// Which worker should own which shard: rendezvous hashing with bounded load. Every worker computes
// the same answer from the same member list; shards move only as far as balance needs when a
// worker joins or leaves; no worker gets more than ceil(shards / members).
import { fnv1a32 } from '../../lib/index.js';

/** A well-mixed 32-bit score of (member, shard) (fnv1a alone mixes short inputs poorly). */
function score(member: string, shard: number): number {
  let h = fnv1a32(`${member}\u0000${shard}`);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

export function assignShards(members: readonly string[], shardCount: number): Map<string, number[]> {
  const sorted = [...new Set(members)].sort();
  const out = new Map<string, number[]>(sorted.map((m) => [m, []]));
  if (sorted.length === 0) return out;
  const floor = Math.floor(shardCount / sorted.length);
  let bigOnes = shardCount % sorted.length; // members that may take floor + 1
  const pairs: { member: string; shard: number; score: number }[] = [];
  for (let shard = 0; shard < shardCount; shard++) {
    for (const member of sorted) pairs.push({ member, shard, score: score(member, shard) });
  }
  pairs.sort((a, b) => b.score - a.score || (a.member < b.member ? -1 : a.member > b.member ? 1 : a.shard - b.shard));
  const taken = new Set<number>();
  for (const { member, shard } of pairs) {
    if (taken.has(shard)) continue;
    const mine = out.get(member)!;
    if (mine.length < floor || (mine.length === floor && bigOnes > 0)) {
      if (mine.length === floor) bigOnes--;
      mine.push(shard);
      taken.add(shard);
    }
  }
  for (const list of out.values()) list.sort((a, b) => a - b);
  return out;
}
