import { describe, expect, it } from 'vitest';
import { leadersToMove, type StreamLeader } from './stream-leaders.js';

const NODES = ['n1', 'n2', 'n3'];

/** A kind's partitions led by `leaders` (one per stream), each replicated on every node. */
function group(leaders: readonly (string | undefined)[], settled = true): StreamLeader[] {
  return leaders.map((leader, p) => ({ name: `EVENTS_${p}`, leader, peers: NODES.filter((n) => n !== leader), settled }));
}

describe('stream leaders', () => {
  it('stream leaders - a node leading more than its share steps down the excess', () => {
    expect(leadersToMove([group(['n1', 'n1', 'n1'])])).toEqual(['EVENTS_1', 'EVENTS_2']);
    expect(leadersToMove([group(['n2', 'n3', 'n2'])])).toEqual(['EVENTS_2']);
    expect(leadersToMove([group(['n1', 'n1', 'n1', 'n1', 'n1', 'n2'])])).toEqual(['EVENTS_2', 'EVENTS_3', 'EVENTS_4']);
  });

  it('stream leaders - a node leading fewer than its share takes one from the busiest', () => {
    // 4 partitions on 3 nodes: 2, 1, 1 is spread; 2, 2, 0 is not.
    expect(leadersToMove([group(['n1', 'n1', 'n2', 'n3'])])).toEqual([]);
    expect(leadersToMove([group(['n1', 'n2', 'n1', 'n2'])])).toEqual(['EVENTS_2']);
  });

  it('stream leaders - spread, unsettled, single or unreplicated streams are left alone', () => {
    expect(leadersToMove([group(['n3', 'n1', 'n2'])])).toEqual([]);
    expect(leadersToMove([group(['n1', 'n1', 'n1'], false)])).toEqual([]);
    expect(leadersToMove([group(['n1', undefined, 'n1'])])).toEqual([]);
    expect(leadersToMove([group(['n1'])])).toEqual([]);
    // R1 streams cannot move: their only node is their leader.
    expect(leadersToMove([[{ name: 'EVENTS_0', leader: 'n1', peers: [], settled: true }, { name: 'EVENTS_1', leader: 'n1', peers: [], settled: true }]])).toEqual([]);
    // Each kind on its own: HISTORICAL's crowding moves HISTORICAL only.
    const historical = group(['n2', 'n2', 'n2']).map((s) => ({ ...s, name: s.name.replace('EVENTS', 'HISTORICAL') }));
    expect(leadersToMove([group(['n1', 'n2', 'n3']), historical])).toEqual(['HISTORICAL_1', 'HISTORICAL_2']);
  });
});
