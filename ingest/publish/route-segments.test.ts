import { describe, expect, it } from 'vitest';
import { subjectFor } from '../../lib/index.js';
import type { ParsedRequest } from '../parse/index.js';
import { routeSegments } from './route-segments.js';
import { SpikeLimiter } from './spike-limiter.js';

/** A parsed realtime request of project 1 whose segments are [distinct_id, shard, events]. */
function parsed(segments: [string, number, number][]): ParsedRequest {
  let offset = 0;
  const records = segments.map(([distinctId, shard, events]) => {
    const segment = { shard, count: events, start: offset, end: offset + events, distinctId, messageId: undefined };
    offset += events;
    return segment;
  });
  return {
    data: new Uint8Array(offset),
    segments: records,
    token: 'phc_t',
    projectId: 1,
    historical: false,
    accepted: offset,
    dropped: {},
  };
}

const streamsOf = (items: { subject: string; count: number }[]) => items.map((i) => [i.subject.split('.')[0], i.count]);

describe('capture routing', () => {
  it('capture routing - a new distinct_id sending 1,001 events in one request stays on EVENTS', () => {
    const limiter = new SpikeLimiter({ perSecond: 100, burst: 1000, maxTracked: 100 });
    const items = routeSegments(parsed([['new', 3, 1001]]), { limiter, maxMessageBytes: 1 << 20 });
    expect(items).toEqual([expect.objectContaining({ subject: subjectFor('events', 1, 3), count: 1001 })]);
    limiter.close();
  });

  it('capture routing - one decision per distinct_id of a request, even when its events span several messages', () => {
    const limiter = new SpikeLimiter({ perSecond: 100, burst: 1000, maxTracked: 100 });
    // `big` is cut into three segments (message size); a second decision per segment would
    // send the second and third to OVERFLOW after the first spent the burst.
    const request = parsed([['big', 2, 900], ['big', 2, 900], ['big', 2, 900], ['other', 5, 1]]);
    expect(streamsOf(routeSegments(request, { limiter, maxMessageBytes: 900 }))).toEqual([
      ['events', 900],
      ['events', 900],
      ['events', 900],
      ['events', 1],
    ]);
    // In debt now: the whole of `big` goes to OVERFLOW, `other` still has tokens.
    expect(streamsOf(routeSegments(request, { limiter, maxMessageBytes: 900 }))).toEqual([
      ['overflow', 900],
      ['overflow', 900],
      ['overflow', 900],
      ['events', 1],
    ]);
    limiter.close();
  });
});
