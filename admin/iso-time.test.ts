import { describe, expect, it } from 'vitest';
import { parseIsoTime, parseTimestamp } from './iso-time.js';

describe('iso time', () => {
  it('iso time - offsets, Z, fractions and naive times', () => {
    expect(parseIsoTime('2024-01-01T10:00:00+01:00')).toEqual({ date: new Date('2024-01-01T09:00:00Z'), hasTime: true, zoned: true });
    expect(parseIsoTime('2024-01-01T10:00:00.123456Z')?.date.toISOString()).toBe('2024-01-01T10:00:00.123Z');
    expect(parseIsoTime('2024-01-01 10:00-0530')?.date.toISOString()).toBe('2024-01-01T15:30:00.000Z');
    expect(parseIsoTime('2024-01-01T10:00:00')).toMatchObject({ zoned: false, hasTime: true });
    expect(parseIsoTime('2024-01-01')).toMatchObject({ zoned: false, hasTime: false });
  });

  it('iso time - impossible calendar dates and times are refused, not rolled over', () => {
    for (const bad of ['2024-02-30T00:00:00Z', '2023-02-29T00:00Z', '2024-13-01T00:00Z', '2024-01-01T24:00Z', '2024-01-01T10:60Z', 'yesterday', '', '2024-01-01T10:00:00+25:00']) {
      expect(parseIsoTime(bad), bad).toBeUndefined();
    }
    expect(parseIsoTime('2024-02-29T00:00:00Z')).toBeDefined();
  });

  it('iso time - timestamps need a time; no offset means UTC', () => {
    expect(parseTimestamp('2024-05-06T07:08:09')?.toISOString()).toBe('2024-05-06T07:08:09.000Z');
    expect(parseTimestamp('2024-05-06')).toBeUndefined();
    expect(parseTimestamp(12)).toBeUndefined();
  });
});
