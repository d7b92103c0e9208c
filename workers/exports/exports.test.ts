import { describe, expect, it, vi } from 'vitest';
import { exportEgressPolicy as egressPolicy } from './egress.js';
import { keeps, type RunPlan } from './plan.js';
import { eventFilter, eventJsonLine, exportRecordOf, processedLines, pythonIsoUs } from './records.js';
import { formatEventLines } from './formats/event-lines.js';
import { alignedStart, dueIntervals, withinBounds } from './schedule.js';
import { formatPrefix, objectKey } from './destinations/s3.js';

const t = (iso: string) => Date.parse(iso);

describe('export schedule', () => {
  it('schedule - intervals are aligned in UTC; weeks start on Sunday 00:00 UTC', () => {
    const at = t('2026-11-26T03:24:36.500Z'); // a Thursday
    expect(new Date(alignedStart(at, 'every 5 minutes')).toISOString()).toBe('2026-11-26T03:20:00.000Z');
    expect(new Date(alignedStart(at, 'every 15 minutes')).toISOString()).toBe('2026-11-26T03:15:00.000Z');
    expect(new Date(alignedStart(at, 'hour')).toISOString()).toBe('2026-11-26T03:00:00.000Z');
    expect(new Date(alignedStart(at, 'day')).toISOString()).toBe('2026-11-26T00:00:00.000Z');
    expect(new Date(alignedStart(at, 'week')).toISOString()).toBe('2026-11-22T00:00:00.000Z');
    expect(new Date(alignedStart(at, 'week')).getUTCDay()).toBe(0);
    expect(alignedStart(t('2026-11-22T00:00:00Z'), 'week')).toBe(t('2026-11-22T00:00:00Z'));
  });

  it('schedule - a run is due after its end plus the grace; missed runs come back in order', () => {
    const start = t('2026-11-26T00:00:00Z');
    expect(dueIntervals(start, t('2026-11-26T01:00:29Z'), 'hour', 30_000)).toEqual([]);
    expect(dueIntervals(start, t('2026-11-26T01:00:30Z'), 'hour', 30_000)).toEqual([{ start, end: start + 3_600_000 }]);
    expect(dueIntervals(start, t('2026-11-26T03:10:00Z'), 'hour', 30_000).map((i) => new Date(i.start).toISOString())).toEqual([
      '2026-11-26T00:00:00.000Z',
      '2026-11-26T01:00:00.000Z',
      '2026-11-26T02:00:00.000Z',
    ]);
  });

  it('schedule - start_at and end_at bound the runs by their end', () => {
    const bounds = { start_at: '2026-11-26T01:00:00Z', end_at: '2026-11-26T03:00:00Z' };
    expect(withinBounds(t('2026-11-26T01:00:00Z'), bounds)).toBe(false);
    expect(withinBounds(t('2026-11-26T02:00:00Z'), bounds)).toBe(true);
    expect(withinBounds(t('2026-11-26T03:00:00Z'), bounds)).toBe(true);
    expect(withinBounds(t('2026-11-26T04:00:00Z'), bounds)).toBe(false);
  });
});

describe('export egress policy', () => {
  it('egress - loopback, private, link-local and reserved addresses are refused unless allowed', () => {
    const closed = egressPolicy('');
    // IPv6 forms that carry a private IPv4 address: mapped, NAT64 (both prefixes), 6to4; Teredo and documentation ranges.
    const carriers = ['::ffff:127.0.0.1', '::ffff:7f00:1', '64:ff9b::a9fe:a9fe', '64:ff9b::169.254.169.254', '64:ff9b:1::a00:1', '2002:a00:1::1', '2002:7f00:1::', '2001:0:4136:e378::1', '2001:db8::1'];
    for (const ip of ['127.0.0.1', '::1', '10.1.2.3', '172.20.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', 'fd00::1', 'fe80::1', '192.0.2.1', ...carriers]) {
      expect(() => closed.check('h', ip), ip).toThrow(/refused by the egress policy/);
    }
    expect(() => closed.check('h', '93.184.216.34')).not.toThrow();
    expect(() => closed.check('h', '2606:2800:220:1::1')).not.toThrow();
    // The same forms carrying a public IPv4 address are public.
    for (const ip of ['64:ff9b::5db8:d822', '64:ff9b::93.184.216.34', '2002:5db8:d822::1', '::ffff:93.184.216.34']) expect(() => closed.check('h', ip), ip).not.toThrow();
    const loopback = egressPolicy('loopback');
    expect(() => loopback.check('h', '127.0.0.1')).not.toThrow();
    expect(() => loopback.check('h', '10.0.0.1')).toThrow();
    const range = egressPolicy('10.1.0.0/16');
    expect(() => range.check('h', '10.1.200.3')).not.toThrow();
    expect(() => range.check('h', '10.2.0.1')).toThrow();
    expect(() => egressPolicy('intranet')).toThrow(/EXPORT_EGRESS_ALLOW/);
  });
});

describe('export records and plans', () => {
  it('records - JSON lines in a fixed key order with Python isoformat timestamps', () => {
    expect(pythonIsoUs(t('2024-01-01T00:00:00Z') * 1000)).toBe('2024-01-01T00:00:00+00:00');
    expect(pythonIsoUs(t('2024-01-01T00:00:00.123Z') * 1000 + 4)).toBe('2024-01-01T00:00:00.123004+00:00');
    const line = eventJsonLine({
      uuid: 'u', event: 'e', properties: { b: 1, a: [2] }, distinct_id: 'd', team_id: 3, timestampUs: t('2024-01-01T00:00:01Z') * 1000,
      person_id: null, elements_chain: '', set: null, set_once: { x: 1 }, insertedAtUs: t('2024-01-01T00:00:02Z') * 1000 + 5, seq: 9,
    });
    expect(line).toBe(
      '{"uuid":"u","event":"e","properties":{"b":1,"a":[2]},"distinct_id":"d","team_id":3,"timestamp":"2024-01-01T00:00:01+00:00","person_id":null,"elements_chain":"","set":null,"set_once":{"x":1},"created_at":"2024-01-01T00:00:02.000005+00:00","_inserted_at":"2024-01-01T00:00:02.000005+00:00"}\n',
    );
  });

  it('records - times are right across fractions, seconds and before 1970, in any order of calls', () => {
    for (const iso of ['2024-01-01T00:00:00.999Z', '2024-01-01T00:00:01Z', '1969-12-31T23:59:59.5Z', '2024-01-01T00:00:00.999Z', '1969-12-31T23:59:59Z']) {
      const ms = t(iso);
      expect(pythonIsoUs(ms * 1000 + 7)).toBe(`${new Date(ms).toISOString().slice(0, 23)}007+00:00`);
      expect(pythonIsoUs(ms * 1000)).toBe(ms % 1000 === 0 ? `${new Date(ms).toISOString().slice(0, 19)}+00:00` : `${new Date(ms).toISOString().slice(0, 23)}000+00:00`);
    }
  });

  it('records - a message of 1,000 events formats each second once, not each time (Date costs ~1 µs a call)', () => {
    // One message: a shared arrival, timestamps spread over 10 seconds (as a busy minute of capture).
    const arrivalUs = t('2024-01-01T01:00:00.250Z') * 1000 + 3;
    const lines = Array.from({ length: 1_000 }, (_, i) => ({
      uuid: `u${i}`, event: 'e', properties: {}, distinct_id: 'd', team_id: 1, timestampUs: t('2024-01-01T00:59:50Z') * 1000 + i * 10_000 + 1,
      person_id: null, elements_chain: '', set: null, set_once: null, insertedAtUs: arrivalUs, seq: i,
    }));
    const toIso = vi.spyOn(Date.prototype, 'toISOString');
    try {
      const text = lines.map(eventJsonLine).join('');
      expect(text.split('\n')[999]).toContain('"timestamp":"2024-01-01T00:59:59.990001+00:00"');
      expect(toIso.mock.calls.length).toBeLessThanOrEqual(11); // 10 seconds of timestamps + 1 of arrival
    } finally {
      toIso.mockRestore();
    }
  });

  it('records - a message formatted in a thread gives the record path\'s lines, choices and byte counts', () => {
    const at = (i: number) => new Date(t('2024-05-01T12:00:00Z') + i * 1_000).toISOString();
    const events = Array.from({ length: 40 }, (_, i) => ({
      uuid: `0190c6a0-0000-7000-8000-${String(i).padStart(12, '0')}`, event: ['pageview', 'signup', 'noise'][i % 3], distinct_id: `d${i}`, project_id: 1,
      timestamp: at(i), properties: { i, name: 'é€😀'.repeat(i % 4), $set: i % 5 === 0 ? { a: i } : undefined }, person_id: null,
    }));
    const text = [...events.map((e) => JSON.stringify(e)), 'not json', '{"no":"event"}', ''].join('\n');
    const data = Buffer.from(text);
    const timeUs = t(at(20)) * 1000 + 123;
    const cases: Array<{ plan: Extract<RunPlan, { kind: 'events' }>; filter: Record<string, unknown>; kept: number }> = [
      { plan: { kind: 'events', mode: 'timestamp', firstSeq: 1, lastSeq: 9, startUs: t(at(5)) * 1000, endUs: t(at(35)) * 1000, exclude: [] }, filter: { exclude_events: ['noise'] }, kept: 20 },
      { plan: { kind: 'events', mode: 'timestamp', firstSeq: 1, lastSeq: 9, startUs: 0, endUs: t(at(40)) * 1000, exclude: [{ firstSeq: 7, lastSeq: 7 }] }, filter: {}, kept: 0 },
      { plan: { kind: 'events', mode: 'arrival', firstSeq: 1, lastSeq: 9, exclude: [{ firstSeq: 7, lastSeq: 8, startUs: t(at(0)) * 1000, endUs: t(at(10)) * 1000 }] }, filter: { include_events: ['signup'] }, kept: 10 },
    ];
    for (const { plan, filter, kept } of cases) {
      const out = formatEventLines({ data, seq: 7, timeUs, plan, filter });
      // The record path: the runner's own loop.
      const wanted = eventFilter(filter);
      const records = processedLines(data).map((l) => exportRecordOf(l, timeUs, 7)).filter((r) => r !== undefined);
      const lines = records.filter((r) => keeps(plan, r) && wanted(r.event)).map(eventJsonLine);
      expect(out.read).toBe(40);
      expect(lines.length).toBe(kept);
      expect(out.text).toBe(lines.join(''));
      expect(out.bytes).toEqual(lines.map((l) => Buffer.byteLength(l)));
      expect(out.ends.map((end, i) => out.text.slice(i === 0 ? 0 : out.ends[i - 1], end))).toEqual(lines);
    }
    const out = formatEventLines({ data, seq: 7, timeUs, plan: cases[0]!.plan, filter: cases[0]!.filter });
    expect(out.bytes.some((b, i) => b !== out.ends[i]! - (i === 0 ? 0 : out.ends[i - 1]!))).toBe(true);
  });

  it('plans - a backfill keeps its timestamps and leaves completed scheduled ranges; a scheduled run leaves what a backfill took', () => {
    const backfill: RunPlan = { kind: 'events', mode: 'timestamp', firstSeq: 1, lastSeq: 100, startUs: 1_000, endUs: 2_000, exclude: [{ firstSeq: 50, lastSeq: 60 }] };
    expect(keeps(backfill, { seq: 10, timestampUs: 1_500 })).toBe(true);
    expect(keeps(backfill, { seq: 10, timestampUs: 2_000 })).toBe(false);
    expect(keeps(backfill, { seq: 55, timestampUs: 1_500 })).toBe(false);
    const scheduled: RunPlan = { kind: 'events', mode: 'arrival', firstSeq: 90, lastSeq: 120, exclude: [{ firstSeq: 1, lastSeq: 100, startUs: 1_000, endUs: 2_000 }] };
    expect(keeps(scheduled, { seq: 95, timestampUs: 1_500 })).toBe(false);
    expect(keeps(scheduled, { seq: 95, timestampUs: 5_000 })).toBe(true);
    expect(keeps(scheduled, { seq: 110, timestampUs: 1_500 })).toBe(true);
  });

  it('S3 keys - PostHog placeholders from the interval end; backfills and parts in the name', () => {
    const run = { exportId: 'x', teamId: 1, model: 'events' as const, start: new Date('2024-05-01T23:00:00Z'), end: new Date('2024-05-02T00:00:00Z'), backfillId: null, runId: 'r' };
    expect(formatPrefix('/exports/{table}/{year}/{month}/{day}/', run)).toBe('/exports/events/2024/05/02/');
    expect(objectKey({ prefix: '/exports/{table}/' }, run, { format: 'JSONLines', compression: 'gzip' }, undefined)).toBe(
      'exports/events/2024-05-01T23:00:00+00:00-2024-05-02T00:00:00+00:00.jsonl.gz',
    );
    expect(objectKey({ prefix: '' }, { ...run, backfillId: 'b' }, { format: 'Parquet', compression: null }, 2)).toBe(
      '2024-05-01T23:00:00+00:00-2024-05-02T00:00:00+00:00-backfill-b-2.parquet',
    );
  });
});
