import { describe, expect, it } from 'vitest';
import { normalizeEvent } from '../../ingest/parse/index.js';
import { captureDistinctId, validateRecord } from './validate.js';

const check = (value: unknown) => {
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return validateRecord(text);
};

describe('import validate', () => {
  it('import validate - accepts an event and reports its distinct_id and whether it has a uuid', () => {
    expect(check({ event: 'e', distinct_id: 'u1', timestamp: '2024-01-01T00:00:00Z' })).toEqual({ ok: true, distinctId: 'u1', hasUuid: false });
    expect(check({ event: 'e', properties: { distinct_id: 7 }, uuid: '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b' })).toEqual({ ok: true, distinctId: '7', hasUuid: true });
    expect(check({ event: 'e', $distinct_id: 'd', properties: null, timestamp: null })).toMatchObject({ ok: true, distinctId: 'd' });
  });

  it('import validate - refuses, with a reason, every record capture would drop or alter', () => {
    const cases: [unknown, RegExp][] = [
      ['{"event":', /not valid JSON/],
      [[{ event: 'e' }], /not a JSON object/],
      ['"text"', /not a JSON object/],
      [{ distinct_id: 'u' }, /no `event` name/],
      [{ event: '', distinct_id: 'u' }, /non-empty string/],
      [{ event: 5, distinct_id: 'u' }, /non-empty string/],
      [{ event: '$performance_event', distinct_id: 'u' }, /performance_event/],
      [{ event: 'e' }, /no distinct_id/],
      [{ event: 'e', distinct_id: null }, /no distinct_id/],
      [{ event: 'e', distinct_id: '' }, /distinct_id is empty/],
      [{ event: 'e', distinct_id: 'u', properties: [1] }, /`properties` must be an object/],
      [{ event: 'e', distinct_id: 'u', uuid: 'not-a-uuid' }, /`uuid` must be a UUID/],
      [{ event: 'e', distinct_id: 'u', uuid: null }, /`uuid` must be a UUID/],
      [{ event: 'e', distinct_id: 'u', timestamp: 'yesterday' }, /`timestamp` must be/],
      [{ event: 'e', distinct_id: 'u', timestamp: 1700000000000 }, /`timestamp` must be/],
    ];
    for (const [value, reason] of cases) {
      const result = check(value);
      expect(result.ok, JSON.stringify(value).slice(0, 80)).toBe(false);
      if (!result.ok) expect(result.reason).toMatch(reason);
    }
  });

  it('import validate - size is capture\'s to judge (its limit follows the cluster\'s settings)', () => {
    expect(validateRecord(JSON.stringify({ event: 'e', distinct_id: 'u', properties: { big: 'x'.repeat(2 * 1024 * 1024) } })).ok).toBe(true);
  });

  it('import validate - derives distinct_id exactly as capture does (lanes key on it)', () => {
    const ctx = { token: 't', projectId: 1, nowMs: Date.now(), nowIso: new Date().toISOString(), sentAtMs: undefined, sentAtIso: undefined, ip: undefined };
    const raws: Record<string, unknown>[] = [
      { event: 'e', distinct_id: 'plain' },
      { event: 'e', distinct_id: 12345 },
      { event: 'e', distinct_id: { nested: [1, 'x'] } },
      { event: 'e', distinct_id: true },
      { event: 'e', distinct_id: 'nul\0inside' },
      { event: 'e', distinct_id: 'é😀'.repeat(150) },
      { event: 'e', distinct_id: 'a'.repeat(250) },
      { event: 'e', $distinct_id: 'dollar' },
      { event: 'e', distinct_id: null, $distinct_id: 'fallback' },
      { event: 'e', properties: { distinct_id: 'in-props' } },
      { event: 'e', distinct_id: '', $distinct_id: 'ignored' },
    ];
    for (const raw of raws) {
      const captured = normalizeEvent(structuredClone(raw), ctx);
      const ours = captureDistinctId(raw);
      if (typeof captured === 'string') expect(ours === undefined || ours === '', JSON.stringify(raw)).toBe(true);
      else expect(ours, JSON.stringify(raw)).toBe(captured.distinct_id);
    }
  });
});
