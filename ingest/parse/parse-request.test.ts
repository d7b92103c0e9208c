import { describe, expect, it } from 'vitest';
import { parseNdjson, shardOf, type CapturedEvent } from '../../lib/index.js';
import { CaptureError } from '../errors.js';
import { parseCaptureRequest, type ParsedRequest, type ParseLimits, type RequestMeta } from './parse-request.js';

const meta = (extra: Partial<RequestMeta> = {}): RequestMeta => ({
  route: 'batch',
  query: '',
  contentType: 'application/json',
  contentEncoding: '',
  ip: '127.0.0.1',
  nowMs: Date.parse('2026-11-22T10:00:00Z'),
  ...extra,
});
const limits: ParseLimits = { maxDecompressedBytes: 10 * 1024 * 1024, maxMessageBytes: 64 * 1024, shardCount: 16 };
const lookup = (token: string) => (token === 'phc_k' ? { projectId: 3, organizationId: 'o' } : undefined);

function parse(body: unknown, m: Partial<RequestMeta> = {}, l: ParseLimits = limits): ParsedRequest {
  return parseCaptureRequest(Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)), meta(m), l, lookup);
}

function segmentsOf(p: ParsedRequest) {
  const out: { shard: number; count: number; events: CapturedEvent[]; distinctId?: string }[] = [];
  for (const { shard, count, start, end, distinctId } of p.segments) {
    out.push({ shard, count, events: parseNdjson(p.data.subarray(start, end)), distinctId });
  }
  return out;
}

/** Each segment's distinct_id, or null when segments carry none (historical). */
const distinctIdsOf = (p: ParsedRequest) => (p.segments.some((s) => s.distinctId === undefined) ? null : p.segments.map((s) => s.distinctId!));
/** Each segment's message id, or null when segments carry none (realtime). */
const messageIdsOf = (p: ParsedRequest) => (p.segments.some((s) => s.messageId === undefined) ? null : p.segments.map((s) => s.messageId!));

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof CaptureError) return err.code;
    throw err;
  }
  return undefined;
}

describe('parse request', () => {
  it('parse - accepts one event, an array, and a batch object', () => {
    expect(parse({ api_key: 'phc_k', event: 'e', distinct_id: 'a' }, { route: 'capture' }).accepted).toBe(1);
    expect(parse([{ api_key: 'phc_k', event: 'e', distinct_id: 'a' }, { event: 'f', distinct_id: 'b' }]).accepted).toBe(2);
    const batch = parse({ api_key: 'phc_k', batch: [{ event: 'e', distinct_id: 'a' }], historical_migration: true });
    expect(batch).toMatchObject({ accepted: 1, historical: true, projectId: 3, token: 'phc_k' });
    expect(distinctIdsOf(batch)).toBeNull();
  });

  it('parse - every event carries its shard, and per distinct_id order is the request order', () => {
    const batch = Array.from({ length: 300 }, (_, i) => ({ event: `e${i}`, distinct_id: `user-${i % 7}` }));
    const parsed = parse({ api_key: 'phc_k', batch });
    const segments = segmentsOf(parsed);
    const shards = segments.map((s) => s.shard);
    expect(shards).toEqual([...shards].sort((a, b) => a - b));
    for (const s of segments) {
      for (const e of s.events) {
        expect(shardOf(e.distinct_id, 16)).toBe(s.shard);
        expect(e.distinct_id).toBe(s.distinctId);
      }
      expect(s.events.length).toBe(s.count);
    }
    for (let d = 0; d < 7; d++) {
      const names = segments.flatMap((s) => s.events).filter((e) => e.distinct_id === `user-${d}`).map((e) => Number(e.event.slice(1)));
      expect(names).toEqual([...names].sort((a, b) => a - b));
      expect(names.length).toBeGreaterThan(40);
    }
  });

  it('parse - segments never exceed the message size and split at line boundaries', () => {
    const big = 'x'.repeat(1000);
    const batch = Array.from({ length: 200 }, (_, i) => ({ event: 'e', distinct_id: 'same', properties: { i, big } }));
    const parsed = parse({ api_key: 'phc_k', batch, historical_migration: true }, {}, { ...limits, maxMessageBytes: 16 * 1024 });
    const segments = segmentsOf(parsed);
    expect(segments.length).toBeGreaterThan(10);
    for (const segment of parsed.segments) {
      expect(segment.end - segment.start).toBeLessThanOrEqual(16 * 1024);
    }
    expect(segments.flatMap((s) => s.events).map((e) => e.properties.i)).toEqual(batch.map((e) => e.properties.i));
  });

  it('parse - historical segments get message ids from project, shard and uuids: same events same ids, anything else different', () => {
    const uuid = (i: number) => `0190a3c4-5b6d-7e8f-9a0b-${String(i).padStart(12, '0')}`;
    const batch = Array.from({ length: 120 }, (_, i) => ({ event: 'e', distinct_id: `u${i % 9}`, uuid: uuid(i), properties: { pad: 'x'.repeat(400) } }));
    const body = { api_key: 'phc_k', batch, historical_migration: true };
    const small = { ...limits, maxMessageBytes: 8 * 1024 };
    const first = parse(body, {}, small);
    const ids = messageIdsOf(first)!;
    expect(ids.length).toBe(first.segments.length);
    expect(ids.length).toBeGreaterThan(9); // split by size within shards too
    expect(new Set(ids).size).toBe(ids.length);
    // Later, with another `now` and sent_at: the same ids.
    expect(messageIdsOf(parse({ ...body, sent_at: '2026-11-22T09:59:00Z' }, { nowMs: Date.parse('2026-11-23T00:00:00Z') }, small))).toEqual(ids);
    // Another project, or one event fewer: other ids.
    const otherProject = parseCaptureRequest(Buffer.from(JSON.stringify(body)), meta(), small, () => ({ projectId: 4, organizationId: 'o' }));
    expect(messageIdsOf(otherProject)!.some((id) => ids.includes(id))).toBe(false);
    const fewer = messageIdsOf(parse({ ...body, batch: batch.slice(1) }, {}, small))!;
    expect(fewer.filter((id) => !ids.includes(id)).length).toBeGreaterThan(0);
    // Realtime messages are merged across requests: no ids of their own.
    expect(messageIdsOf(parse({ ...body, historical_migration: false }))).toBeNull();
  });

  it('parse - one event larger than a message is event_too_large', () => {
    const batch = [{ event: 'e', distinct_id: 'a', properties: { big: 'x'.repeat(70 * 1024) } }];
    expect(codeOf(() => parse({ api_key: 'phc_k', batch }))).toBe('event_too_large');
  });

  it('parse - drops are counted by reason and the rest is kept', () => {
    const parsed = parse({ api_key: 'phc_k', batch: [{ event: 'e', distinct_id: 'a' }, { distinct_id: 'b' }, { event: 'e' }, { event: 'e', distinct_id: '' }] });
    expect(parsed.accepted).toBe(1);
    expect(parsed.dropped).toEqual({ missing_event_name: 1, missing_distinct_id: 1, empty_distinct_id: 1 });
  });

  it('parse - /engage events without a name become $identify', () => {
    const parsed = parse({ api_key: 'phc_k', distinct_id: 'a', $set: { x: 1 } }, { route: 'engage' });
    expect(segmentsOf(parsed)[0]!.events[0]).toMatchObject({ event: '$identify', $set: { x: 1 } });
  });

  it('parse - sent_at from the body, else ?_= in milliseconds (ignored when it looks like seconds)', () => {
    const body = { api_key: 'phc_k', batch: [{ event: 'e', distinct_id: 'a' }], sent_at: '2026-11-22T09:59:00.000Z' };
    expect(segmentsOf(parse(body))[0]!.events[0]!.sent_at).toBe('2026-11-22T09:59:00.000Z');
    const single = { api_key: 'phc_k', event: 'e', distinct_id: 'a' };
    expect(segmentsOf(parse(single, { query: '_=1795300000000' }))[0]!.events[0]!.sent_at).toBe(new Date(1795300000000).toISOString());
    expect(segmentsOf(parse(single, { query: '_=1795300000' }))[0]!.events[0]!.sent_at).toBeUndefined();
  });

  it('parse - malformed requests get their codes', () => {
    expect(codeOf(() => parse('{not json'))).toBe('invalid_json');
    expect(codeOf(() => parse('"a string"'))).toBe('invalid_payload');
    expect(codeOf(() => parse({ api_key: 'phc_k', batch: 'x' }))).toBe('invalid_payload');
    expect(codeOf(() => parse({ api_key: 'phc_k', batch: [] }))).toBe('empty_batch');
    expect(codeOf(() => parse([]))).toBe('empty_batch');
    expect(codeOf(() => parse({ api_key: 'phc_k', batch: [1] }))).toBe('invalid_event');
    expect(codeOf(() => parse({ api_key: 'phc_k', batch: [{ event: 'e', distinct_id: 'a', properties: 'x' }] }))).toBe('invalid_event');
    expect(codeOf(() => parse({ batch: [{ event: 'e', distinct_id: 'a' }] }))).toBe('missing_api_key');
    expect(codeOf(() => parse({ api_key: 'phc_unknown', batch: [{ event: 'e', distinct_id: 'a' }] }))).toBe('unknown_api_key');
  });
});
