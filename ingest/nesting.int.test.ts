// Capture refuses JSON nested deeper than MAX_NESTING_DEPTH (PostHog stops at 128): a deeply
// nested event would be accepted, then fail every worker that re-serialises it.
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { post, startIngestHarness, type IngestHarness } from '../test/ingest-harness.js';

const KEY = 'phc_nesting_test';
const nested = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
const deepEvent = (levels: number) => `{"event":"deep","distinct_id":"d","$set":{"x":${nested(levels)}}}`;

describe('capture nesting limit', () => {
  let h: IngestHarness;
  beforeAll(async () => {
    h = await startIngestHarness({}, { [KEY]: 1 });
  });
  afterAll(() => h.stop());

  const cases: [string, () => Promise<Response>][] = [
    // ~4 KB, plain JSON: parsed on the event loop
    ['inline, 2,000 levels', () => post(`${h.url}/capture/`, `{"api_key":"${KEY}","event":"e","distinct_id":"d","properties":{"x":${nested(2000)}}}`)],
    // gzip: parsed in a thread
    ['gzip in a thread, 5,000-deep $set on /batch/', () => post(`${h.url}/batch/`, gzipSync(`{"api_key":"${KEY}","batch":[${deepEvent(5000)}]}`), { 'content-encoding': 'gzip' })],
    ['gzip in a thread, 16,000 levels', () => post(`${h.url}/batch/`, gzipSync(`{"api_key":"${KEY}","batch":[${deepEvent(16_000)}]}`), { 'content-encoding': 'gzip' })],
    // > 120 KiB: scanned event by event in a thread
    [
      'a large batch with one deep event among 1,000',
      () => {
        const pad = Array.from({ length: 1000 }, (_, i) => `{"event":"pad","distinct_id":"p${i}","properties":{"s":"${'x'.repeat(200)}"}}`);
        return post(`${h.url}/batch/`, `{"api_key":"${KEY}","batch":[${[...pad, deepEvent(16_000)].join(',')}]}`);
      },
    ],
  ];
  for (const [name, send] of cases) {
    it(`nesting - ${name} → 400 invalid_event naming the limit, nothing stored`, async () => {
      const before = await h.totalMessages();
      const res = await send();
      expect(res.status).toBe(400);
      const body = (await res.json()) as { code: string; detail: string };
      expect(body.code).toBe('invalid_event');
      expect(body.detail).toContain('deeper than 128 levels');
      expect(await h.totalMessages()).toBe(before);
      expect((await fetch(`${h.url}/_ready`)).status).toBe(200);
    });
  }

  it('nesting - 128 levels from the root are accepted and stored', async () => {
    // root (1) → batch (2) → event (3) → $set (4) → x: 124 levels of arrays
    const res = await post(`${h.url}/batch/`, `{"api_key":"${KEY}","batch":[${deepEvent(124)}]}`);
    expect(res.status).toBe(200);
    const stored = (await h.events('events')).filter((e) => e.event === 'deep');
    expect(stored).toHaveLength(1);
  });
});
