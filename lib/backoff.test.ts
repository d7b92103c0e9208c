import { describe, expect, it } from 'vitest';
import { exponentialBackoff } from './backoff.js';

describe('backoff', () => {
  it('backoff - the first wait, doubling each step, never past the ceiling, however long the outage', () => {
    expect([0, 1, 2, 3, 4, 5].map((step) => exponentialBackoff(50, step, 1_000))).toEqual([50, 100, 200, 400, 800, 1_000]);
    expect(exponentialBackoff(250, -1, 30_000)).toBe(250);
    expect(exponentialBackoff(250, 10_000, 30_000)).toBe(30_000);
    expect(Number.isFinite(exponentialBackoff(250, 10_000, Infinity))).toBe(true);
  });
});
