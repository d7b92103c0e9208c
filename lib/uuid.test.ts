import { describe, expect, it } from 'vitest';
import { isUuid, uuidv7 } from './uuid.js';

describe('uuid', () => {
  it('uuid - v7 carries the time, version 7 and the RFC variant', () => {
    const ms = Date.UTC(2026, 10, 22, 12, 0, 0, 123);
    const id = uuidv7(ms);
    expect(isUuid(id)).toBe(true);
    expect(parseInt(id.slice(0, 8) + id.slice(9, 13), 16)).toBe(ms);
    expect(id[14]).toBe('7');
    expect('89ab').toContain(id[19]);
  });

  it('uuid - v7 ids are unique and sort by time', () => {
    const ids = Array.from({ length: 10_000 }, (_, i) => uuidv7(1_700_000_000_000 + i));
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
  });

  it('uuid - v7 ids of one millisecond differ in their random bits, across refills of the random pool', () => {
    const ids = Array.from({ length: 5_000 }, () => uuidv7(1_700_000_000_000));
    expect(new Set(ids).size).toBe(ids.length);
    expect(new Set(ids.map((id) => id[19])).size).toBe(4); // variant 10xx: 8, 9, a, b
  });
});
