import { describe, expect, it } from 'vitest';
import { SpikeLimiter } from './spike-limiter.js';

describe('spike limiter', () => {
  it('spike - allows the burst, then the sustained rate, per (project, distinct_id)', () => {
    const limiter = new SpikeLimiter({ perSecond: 10, burst: 100, maxTracked: 1000 });
    const t = 1_000_000;
    expect(limiter.allow(1, 'hot', 100, t)).toBe(true);
    expect(limiter.allow(1, 'hot', 1, t)).toBe(false);
    expect(limiter.allow(2, 'hot', 1, t)).toBe(true); // another project: its own bucket
    expect(limiter.allow(1, 'cold', 1, t)).toBe(true);
    expect(limiter.allow(1, 'hot', 5, t + 500)).toBe(true); // refilled 5 in half a second
    expect(limiter.allow(1, 'hot', 1, t + 500)).toBe(false);
    limiter.close();
  });

  it('spike - a rate of 0 disables it', () => {
    const limiter = new SpikeLimiter({ perSecond: 0, burst: 0, maxTracked: 1000 });
    expect(limiter.allow(1, 'x', 1_000_000)).toBe(true);
    expect(limiter.tracked).toBe(0);
    limiter.close();
  });

  it('spike - memory is bounded by the tracked-id cap, forgetting the least recently seen id', () => {
    const limiter = new SpikeLimiter({ perSecond: 1, burst: 10, maxTracked: 1000 });
    expect(limiter.allow(1, 'hot', 10, 0)).toBe(true); // the hot id has spent its burst
    for (let i = 0; i < 5000; i++) {
      limiter.allow(1, `id-${i}`, 1, 0);
      if (i % 100 === 0) expect(limiter.allow(1, 'hot', 1, 0)).toBe(false); // still remembered: seen recently
    }
    expect(limiter.tracked).toBe(1000);
    expect(limiter.allow(1, 'id-0', 10, 0)).toBe(true); // long unseen: forgotten, a full burst again
    limiter.close();
  });
});
