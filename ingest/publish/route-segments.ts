// Which subject each segment of a parsed request is published to.
import { subjectFor, type StreamKind } from '../../lib/index.js';
import { fitsInMessage } from '../message-size.js';
import type { ParsedRequest } from '../parse/index.js';
import type { PublishItem } from './publisher.js';
import type { SpikeLimiter } from './spike-limiter.js';

/** A publish item and the stream it goes to (for the accepted-events count). */
export interface RoutedItem extends PublishItem {
  stream: StreamKind;
}

/**
 * Chooses each segment's subject — HISTORICAL for migrations; OVERFLOW for a distinct_id over
 * its spike budget; EVENTS otherwise. Spike detection decides once per distinct_id of the
 * request, on all its events: an id's segments are neighbours (one group, cut to message size),
 * and splitting one request of one id between EVENTS and OVERFLOW would only lose its order.
 * Neighbouring segments bound for one subject are joined into one item while they fit in a
 * message (a batch of 1,000 users has 1,000 segments but ~one item per shard): fewer items for
 * the publisher to queue, count and join.
 */
export function routeSegments(parsed: ParsedRequest, deps: { limiter: SpikeLimiter; maxMessageBytes: number }): RoutedItem[] {
  const { segments, data } = parsed;
  const items: RoutedItem[] = [];
  let last: (RoutedItem & { start: number; end: number }) | undefined;
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
    const subject = subjectFor(kind, parsed.projectId, segment.shard);
    if (segment.messageId !== undefined) {
      // Its own message under its own id (never joined: the id names exactly these events).
      items.push({ subject, stream: kind, data: data.subarray(segment.start, segment.end), count: segment.count, msgId: segment.messageId });
      last = undefined;
      continue;
    }
    if (last && last.subject === subject && last.end === segment.start && fitsInMessage(segment.end - last.start, deps.maxMessageBytes)) {
      last.end = segment.end;
      last.count += segment.count;
      last.data = data.subarray(last.start, segment.end);
      continue;
    }
    last = { subject, stream: kind, data: data.subarray(segment.start, segment.end), count: segment.count, start: segment.start, end: segment.end };
    items.push(last);
  }
  return items;
}
