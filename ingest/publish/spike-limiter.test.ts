import { describe, expect, it } from 'vitest';
import { SpikeLimiter } from './spike-limiter.js';

// The defaults of SPIKE_EVENTS_PER_SECOND and SPIKE_BURST.
const defaults = { perSecond: 100, burst: 1000, maxTracked: 1000 };

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

  it('spike - a new id sending more than its burst in one request is let through, then diverted until refilled', () => {
    const limiter = new SpikeLimiter(defaults);
    const t = 1_000_000;
    expect(limiter.allow(1, 'new', 1001, t)).toBe(true); // 1,000 tokens left: charged 1,001, balance −1
    expect(limiter.allow(1, 'new', 1, t)).toBe(false);
    expect(limiter.allow(1, 'new', 1, t + 10)).toBe(false); // 10 ms refill 1 token: back to 0, still none left
    expect(limiter.allow(1, 'new', 500, t + 11)).toBe(true); // a token again: charged in full
    expect(limiter.allow(1, 'new', 1, t + 12)).toBe(false);
    limiter.close();
  });

  it('spike - a diverted request is not charged: the id refills while diverted', () => {
    const limiter = new SpikeLimiter(defaults);
    const t = 1_000_000;
    expect(limiter.allow(1, 'id', 1200, t)).toBe(true); // balance −200: 2 s to refill
    for (let ms = 100; ms < 2000; ms += 100) expect(limiter.allow(1, 'id', 1000, t + ms)).toBe(false);
    expect(limiter.allow(1, 'id', 10, t + 2001)).toBe(true);
    limiter.close();
  });

  it('spike - the sustained rate holds for large requests: an id sending 20,000 events every 10 s is diverted most of the time', () => {
    const limiter = new SpikeLimiter(defaults);
    const t = 1_000_000;
    expect(limiter.allow(1, 'huge', 20_000, t)).toBe(true); // balance −19,000: 190 s to pay back at 100/s
    for (let s = 10; s < 190; s += 10) expect(limiter.allow(1, 'huge', 20_000, t + s * 1000), `at ${s} s`).toBe(false);
    expect(limiter.allow(1, 'huge', 1, t + 190_001)).toBe(true);
    limiter.close();
  });

  it('spike - a refilled bucket never holds more than the burst', () => {
    const limiter = new SpikeLimiter(defaults);
    const t = 1_000_000;
    expect(limiter.allow(1, 'idle', 1, t)).toBe(true);
    expect(limiter.allow(1, 'idle', 1000, t + 3_600_000)).toBe(true); // an hour idle: 1,000 tokens, not 360,000
    expect(limiter.allow(1, 'idle', 1, t + 3_600_000)).toBe(false);
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
