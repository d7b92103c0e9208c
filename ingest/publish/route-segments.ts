// Which subject each segment of a parsed request is published to.
import { subjectFor } from '../../lib/index.js';
import type { ParsedRequest } from '../parse/index.js';
import type { PublishItem } from './publisher.js';
import type { SpikeLimiter } from './spike-limiter.js';

/**
 * Chooses each segment's subject — HISTORICAL for migrations; OVERFLOW for a distinct_id over
 * its spike budget; EVENTS otherwise. Spike detection decides once per distinct_id of the
 * request, on all its events: an id's segments are neighbours (one group, cut to message size),
 * and splitting one request of one id between EVENTS and OVERFLOW would only lose its order.
 * Neighbouring segments bound for one subject are joined into messages by the publisher.
 */
export function routeSegments(parsed: ParsedRequest, deps: { limiter: SpikeLimiter }): PublishItem[] {
  const { segments, data } = parsed;
  const items: PublishItem[] = new Array<PublishItem>(segments.length);
  const nowMs = Date.now();
  let kind: 'historical' | 'overflow' | 'events' = parsed.historical ? 'historical' : 'events';
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i]!;
    const id = segment.distinctId;
    if (!parsed.historical && id !== undefined && (i === 0 || id !== segments[i - 1]!.distinctId)) {
      let idEvents = segment.count;
      for (let j = i + 1; j < segments.length && segments[j]!.distinctId === id; j++) idEvents += segments[j]!.count;
      kind = deps.limiter.allow(parsed.projectId, id, idEvents, nowMs) ? 'events' : 'overflow';
    }
    const item: PublishItem = { subject: subjectFor(kind, parsed.projectId, segment.shard), data: data.subarray(segment.start, segment.end), count: segment.count };
    // Its own message under its own id (never joined: the id names exactly these events).
    if (segment.messageId !== undefined) item.msgId = segment.messageId;
    items[i] = item;
  }
  return items;
}
