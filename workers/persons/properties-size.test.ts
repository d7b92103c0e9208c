import { describe, expect, it } from 'vitest';
import { jsonBytes, PropertiesBudget } from './properties-size.js';

describe('properties size cap', () => {
  it('PropertiesBudget - admits updates within the cap, refuses one that would pass it, admits one that shrinks what is already too large', () => {
    const budget = new PropertiesBudget(1_000);
    let props: Record<string, unknown> = { a: 'x'.repeat(400) };
    const set = (id: string, update: Record<string, unknown>) => {
      const next = { ...props, ...update };
      const verdict = budget.admits(id, props, next, [update]);
      if (verdict.ok) props = next;
      return verdict;
    };
    expect(set('p', { b: 'y'.repeat(400) })).toEqual({ ok: true });
    expect(set('p', { c: 'z'.repeat(400) })).toEqual({ ok: false, bytes: jsonBytes({ ...props, c: 'z'.repeat(400) }) });
    expect(Object.keys(props)).toEqual(['a', 'b']);
    // Overwriting a value with a shorter one stays within the cap although the bound grew.
    expect(set('p', { a: 'short' })).toEqual({ ok: true });
    expect(set('p', { c: 'z'.repeat(400) })).toEqual({ ok: true });

    // Properties already over the cap (a merge made them so) may shrink, never grow.
    const big = { a: 'x'.repeat(2_000) };
    expect(budget.admits('q', big, { a: 'x'.repeat(1_500) }, [{ a: 'x'.repeat(1_500) }])).toEqual({ ok: true });
    expect(budget.admits('r', big, { ...big, b: 1 }, [{ b: 1 }]).ok).toBe(false);
  });

  it('jsonBytes - counts UTF-8 bytes, and throws RangeError for a value too deep to serialise', () => {
    expect(jsonBytes({ é: '€' })).toBe(Buffer.byteLength('{"é":"€"}'));
    let deep: unknown = 1;
    for (let i = 0; i < 20_000; i++) deep = { a: deep };
    expect(() => jsonBytes(deep)).toThrow(RangeError);
  });
});
