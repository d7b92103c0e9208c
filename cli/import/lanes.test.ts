import { describe, expect, it } from 'vitest';
import type { BatchItem } from './batch.js';
import { Lane, laneOf } from './lanes.js';

const item = (position: number, size = 10): BatchItem => ({ position, line: position, bytes: Buffer.alloc(size) });

describe('import lanes', () => {
  it('import lanes - a distinct_id always maps to the same lane, and ids spread over lanes', () => {
    expect(laneOf('user-1', 4)).toBe(laneOf('user-1', 4));
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 4000; i++) counts[laneOf(`user-${i}`, 4)]!++;
    for (const c of counts) expect(c).toBeGreaterThan(800);
  });

  it('import lanes - resuming, the batch that was in flight is rebuilt exactly (whatever the batch size now), then batches fill as usual', async () => {
    const delivered: number[][] = [];
    const lane = new Lane(0, 1, (count) => count <= 2, (items) => Promise.resolve(void delivered.push(items.map((i) => i.position))), 5);
    expect(lane.replaying).toBe(true);
    for (const p of [2, 3, 5, 8, 9, 10]) await lane.add(item(p));
    expect(lane.replaying).toBe(false);
    await lane.seal();
    await lane.drained();
    expect(delivered).toEqual([[2, 3, 5], [8, 9], [10]]);
  });

  it('import lanes - one batch in flight at a time, in order; the reader waits when the queue is full', async () => {
    const delivered: number[][] = [];
    let inflight = 0;
    let maxInflight = 0;
    const releases: (() => void)[] = [];
    const lane = new Lane(0, 1, (count) => count <= 2, async (items) => {
      inflight++;
      maxInflight = Math.max(maxInflight, inflight);
      await new Promise<void>((r) => releases.push(r));
      delivered.push(items.map((i) => i.position));
      inflight--;
    });
    // Batches of 2: [1,2] goes out, [3,4] is queued, and adding 7 must wait (open [5,6] is full).
    for (const p of [1, 2, 3, 4, 5, 6]) expect(lane.add(item(p))).toBeUndefined();
    const waiting = lane.add(item(7));
    expect(waiting).toBeInstanceOf(Promise);
    let resumed = false;
    void waiting!.then(() => (resumed = true));
    await new Promise((r) => setTimeout(r, 10));
    expect(resumed).toBe(false);
    releases.shift()!(); // [1,2] acknowledged → [3,4] goes out → room for [5,6]
    await new Promise((r) => setTimeout(r, 10));
    expect(resumed).toBe(true);
    void lane.seal();
    while (delivered.length < 4) {
      await new Promise((r) => setTimeout(r, 5));
      releases.shift()?.();
    }
    await lane.drained();
    expect(delivered).toEqual([[1, 2], [3, 4], [5, 6], [7]]);
    expect(maxInflight).toBe(1);
  });

  it('import lanes - halt drops what is queued and wakes a waiting reader; the batch in flight finishes', async () => {
    const delivered: number[][] = [];
    let release: () => void = () => undefined;
    const lane = new Lane(0, 1, (count) => count <= 1, async (items) => {
      await new Promise<void>((r) => (release = r));
      delivered.push(items.map((i) => i.position));
    });
    void lane.add(item(1));
    void lane.add(item(2)); // [1] out
    void lane.add(item(3)); // [2] queued
    const waiting = lane.add(item(4)); // [3] cannot be queued
    lane.halt();
    await waiting;
    release();
    await lane.drained();
    expect(delivered).toEqual([[1]]);
  });
});
