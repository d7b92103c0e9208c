import { describe, expect, it } from 'vitest';
import { isUuid, type CapturedEvent } from '../../lib/index.js';
import { correctedTimestamp, extractDistinctId, normalizeEvent, type EventContext } from './normalize-event.js';

const now = Date.parse('2026-11-22T10:00:00.000Z');
const ctx = (extra: Partial<EventContext> = {}): EventContext => ({
  token: 'phc_k',
  projectId: 7,
  nowMs: now,
  nowIso: new Date(now).toISOString(),
  sentAtMs: undefined,
  sentAtIso: undefined,
  ip: '10.0.0.1',
  ...extra,
});

describe('normalize event', () => {
  it('normalize - drops events without a name, distinct_id, or with an empty one', () => {
    expect(normalizeEvent({ distinct_id: 'a' }, ctx())).toBe('missing_event_name');
    expect(normalizeEvent({ event: '', distinct_id: 'a' }, ctx())).toBe('missing_event_name');
    expect(normalizeEvent({ event: 'e' }, ctx())).toBe('missing_distinct_id');
    expect(normalizeEvent({ event: 'e', distinct_id: null }, ctx())).toBe('missing_distinct_id');
    expect(normalizeEvent({ event: 'e', distinct_id: '' }, ctx())).toBe('empty_distinct_id');
    expect(normalizeEvent({ event: '$performance_event', distinct_id: 'a' }, ctx())).toBe('performance_event');
  });

  it('normalize - distinct_id from $distinct_id or properties, stringified, NUL-free, cut to 200', () => {
    expect(extractDistinctId({ $distinct_id: 'x' }, {})).toBe('x');
    expect(extractDistinctId({}, { distinct_id: 'p' })).toBe('p');
    expect(extractDistinctId({ distinct_id: 23 }, {})).toBe('23');
    expect(extractDistinctId({ distinct_id: ['a', 'b'] }, {})).toBe('["a","b"]');
    expect(extractDistinctId({ distinct_id: 'a\0b' }, {})).toBe('a\ufffdb');
    expect(extractDistinctId({ distinct_id: 'é'.repeat(300) }, {})).toBe('é'.repeat(200));
    expect(extractDistinctId({ distinct_id: '🦔'.repeat(201) }, {})).toBe('🦔'.repeat(200));
  });

  it('normalize - keeps a valid client uuid, replaces a missing or invalid one with a UUIDv7', () => {
    const kept = normalizeEvent({ event: 'e', distinct_id: 'a', uuid: '018A981F-4B35-7C66-825E-8B0EEAE65714' }, ctx()) as CapturedEvent;
    expect(kept.uuid).toBe('018a981f-4b35-7c66-825e-8b0eeae65714');
    for (const uuid of [undefined, '', 'not-a-uuid', 42]) {
      const made = normalizeEvent({ event: 'e', distinct_id: 'a', uuid }, ctx()) as CapturedEvent;
      expect(isUuid(made.uuid)).toBe(true);
      expect(made.uuid[14]).toBe('7');
    }
  });

  it('normalize - builds the captured line with token, project, now, ip, sent_at and top-level $set', () => {
    const e = normalizeEvent(
      { event: 'e', distinct_id: 'a', properties: { k: 1 }, $set: { email: 'x' }, $set_once: { first: 1 } },
      ctx({ sentAtMs: now - 5, sentAtIso: new Date(now - 5).toISOString() }),
    ) as CapturedEvent;
    expect(e).toMatchObject({
      event: 'e',
      distinct_id: 'a',
      properties: { k: 1 },
      token: 'phc_k',
      project_id: 7,
      now: '2026-11-22T10:00:00.000Z',
      sent_at: '2026-11-22T09:59:59.995Z',
      ip: '10.0.0.1',
      $set: { email: 'x' },
      $set_once: { first: 1 },
    });
  });

  it('normalize - timestamp skew correction: now + (timestamp - sent_at)', () => {
    const sentAtMs = Date.parse('2026-11-22T09:00:00.000Z'); // client clock an hour behind
    const ts = correctedTimestamp({ timestamp: '2026-11-22T08:59:50.000Z' }, {}, ctx({ sentAtMs }));
    expect(new Date(ts).toISOString()).toBe('2026-11-22T09:59:50.000Z');
  });

  it('normalize - $ignore_sent_at keeps the client timestamp; offset wins over both', () => {
    const sentAtMs = Date.parse('2026-11-22T09:00:00.000Z');
    const raw = { timestamp: '2026-11-22T08:59:50.000Z' };
    expect(correctedTimestamp(raw, { $ignore_sent_at: true }, ctx({ sentAtMs }))).toBe(Date.parse(raw.timestamp));
    expect(correctedTimestamp({ ...raw, offset: 3000 }, {}, ctx({ sentAtMs }))).toBe(now - 3000);
  });

  it('normalize - no timestamp is now; more than 23h ahead is now; unparseable is now', () => {
    expect(correctedTimestamp({}, {}, ctx())).toBe(now);
    expect(correctedTimestamp({ timestamp: '2026-11-23T10:00:00.000Z' }, {}, ctx())).toBe(now);
    expect(correctedTimestamp({ timestamp: '2026-11-23T08:00:00.000Z' }, {}, ctx())).toBe(Date.parse('2026-11-23T08:00:00.000Z'));
    expect(correctedTimestamp({ timestamp: 'yesterday' }, {}, ctx())).toBe(now);
  });

  it('normalize - historical timestamps in the past are kept as given', () => {
    expect(correctedTimestamp({ timestamp: '2023-04-24T06:34:00+00:00' }, {}, ctx())).toBe(Date.parse('2023-04-24T06:34:00Z'));
  });
});
