import { describe, expect, it } from 'vitest';
import { logDomain } from './charts.js';

describe('bench charts', () => {
  it('charts - the log scale starts a power of ten below every bar, so each has a length', () => {
    expect(logDomain([6091, 16_504, 10_257_942])).toEqual([1000, 100_000_000]);
    // A value that is itself a power of ten is not the start of the scale (its bar would be empty).
    expect(logDomain([10_000, 50_000])).toEqual([1000, 100_000]);
    expect(logDomain([42])).toEqual([10, 100]);
  });
});
