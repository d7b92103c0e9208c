import { describe, expect, it } from 'vitest';
import type { ProjectLimits } from '../../lib/index.js';
import { ProjectLimiter, type LimitedRequest } from './project-limiter.js';

function limiter(limits: Record<string, ProjectLimits>) {
  return new ProjectLimiter((token) => limits[token]);
}

const realtime = (events: number, token = 'a', projectId = 1): LimitedRequest => ({ token, projectId, historical: false, events, messages: 0 });
const historical = (messages: number, events = messages * 10): LimitedRequest => ({ token: 'a', projectId: 1, historical: true, events, messages });

describe('project limiter', () => {
  it('project limiter - a project without limits, or a request without events, always passes', () => {
    const l = limiter({ a: { eventsPerSecond: 1 } });
    for (let i = 0; i < 100; i++) expect(l.decide(realtime(5, 'b', 2), 0).kind).toBe('accept');
    for (let i = 0; i < 100; i++) expect(l.decide(realtime(0), 0).kind).toBe('accept');
  });

  it('project limiter - events per second: a second’s worth, then refused with the seconds until a token is back', () => {
    const l = limiter({ a: { eventsPerSecond: 10 } });
    for (let i = 0; i < 10; i++) expect(l.decide(realtime(1), 1_000).kind).toBe('accept');
    expect(l.decide(realtime(1), 1_000)).toEqual({ kind: 'rate_limited', limit: 'events_per_second', perSecond: 10, retryAfterSeconds: 1 });
    // 100 ms later one token is back.
    expect(l.decide(realtime(1), 1_100).kind).toBe('accept');
    expect(l.decide(realtime(1), 1_100).kind).toBe('rate_limited');
  });

  it('project limiter - a request larger than a second’s worth passes once and then holds the project back until paid for', () => {
    const l = limiter({ a: { eventsPerSecond: 100 } });
    expect(l.decide(realtime(1_000), 0).kind).toBe('accept');
    // 900 events of debt: 9 s at 100/s until the bucket is back at 0, a token later it passes.
    expect(l.decide(realtime(1), 0)).toMatchObject({ kind: 'rate_limited', retryAfterSeconds: 10 });
    expect(l.decide(realtime(1), 8_999).kind).toBe('rate_limited');
    expect(l.decide(realtime(1), 9_001).kind).toBe('accept');
  });

  it('project limiter - the sustained rate holds: over 60 s of requests, about rate × 60 events pass', () => {
    const l = limiter({ a: { eventsPerSecond: 50 } });
    let passed = 0;
    for (let t = 0; t < 60_000; t += 7) {
      if (l.decide(realtime(3), t).kind === 'accept') passed += 3;
    }
    expect(passed).toBeGreaterThanOrEqual(50 * 60);
    expect(passed).toBeLessThanOrEqual(50 * 61 + 3);
  });

  it('project limiter - projects have their own buckets; realtime and historical too', () => {
    const l = limiter({ a: { eventsPerSecond: 1, historicalMessagesPerSecond: 2 }, b: { eventsPerSecond: 1 } });
    expect(l.decide(realtime(1), 0).kind).toBe('accept');
    expect(l.decide(realtime(1), 0).kind).toBe('rate_limited');
    expect(l.decide(realtime(1, 'b', 2), 0).kind).toBe('accept');
    expect(l.decide(historical(2), 0).kind).toBe('accept');
    expect(l.decide(historical(1), 0)).toEqual({ kind: 'rate_limited', limit: 'historical_messages_per_second', perSecond: 2, retryAfterSeconds: 1 });
  });

  it('project limiter - the day’s quota: requests pass until it is used up, then are dropped until 00:00 UTC', () => {
    const l = limiter({ a: { eventsPerDay: 100 } });
    const day = Date.UTC(2026, 0, 5, 23, 0, 0);
    expect(l.decide(realtime(60), day).kind).toBe('accept');
    // Crossing the quota within one request is allowed (the request is not cut).
    expect(l.decide(realtime(60), day).kind).toBe('accept');
    expect(l.decide(realtime(1), day)).toEqual({ kind: 'quota_exhausted', perDay: 100 });
    expect(l.decide(historical(1), day + 3_599_000).kind).toBe('quota_exhausted');
    expect(l.decide(realtime(1), Date.UTC(2026, 0, 6)).kind).toBe('accept');
  });

  it('project limiter - a request refused for its rate does not use the quota', () => {
    const l = limiter({ a: { eventsPerSecond: 1, eventsPerDay: 3 } });
    expect(l.decide(realtime(1), 0).kind).toBe('accept');
    for (let i = 0; i < 10; i++) expect(l.decide(realtime(1), 0).kind).toBe('rate_limited');
    expect(l.decide(realtime(1), 1_000).kind).toBe('accept');
    expect(l.decide(realtime(1), 2_000).kind).toBe('accept');
    expect(l.decide(realtime(1), 3_000).kind).toBe('quota_exhausted');
  });

  it('project limiter - a lowered limit applies at once; a removed one lets everything through', () => {
    const limits: Record<string, ProjectLimits> = { a: { eventsPerSecond: 1_000 } };
    const l = limiter(limits);
    expect(l.decide(realtime(1), 0).kind).toBe('accept');
    limits.a = { eventsPerSecond: 2 };
    expect(l.decide(realtime(1), 0).kind).toBe('accept');
    expect(l.decide(realtime(1), 0).kind).toBe('accept');
    expect(l.decide(realtime(1), 0).kind).toBe('rate_limited');
    delete limits.a;
    expect(l.decide(realtime(1), 0).kind).toBe('accept');
  });
});
