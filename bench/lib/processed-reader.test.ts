import { describe, expect, it } from 'vitest';
import { scanSentTimes } from './processed-reader.js';

describe('bench processed reader', () => {
  it('processed reader - finds each line\'s send time in the bytes, wherever the property sits', () => {
    const lines = [
      { uuid: 'a', properties: { $bench_sent_ms: 1700000000001, x: 1 } },
      { properties: { y: '"$bench_sent_ms":', $bench_sent_ms: 1700000000002 }, person_id: 'p' },
      { properties: { none: true } },
    ];
    const body = Buffer.from(lines.map((l) => JSON.stringify(l)).join('\n'));
    const found: number[] = [];
    scanSentTimes(body, (ms) => found.push(ms));
    // The marker inside a string value is escaped in JSON ("\"$bench…"): not taken for the property.
    expect(found).toEqual([1700000000001, 1700000000002]);
  });
});
