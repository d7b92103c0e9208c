// Property-based against a real ingest node and nats-server: random bytes, random JSON and
// plausible events in random encodings. Never a 5xx for bad input, the node stays ready, and
// every 200 stored exactly the events it had to.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fuzzRequestArb } from '../test/capture-fuzz.js';
import { startIngestHarness, type IngestHarness } from '../test/ingest-harness.js';

const KEY = 'phc_fuzz_live';

describe('capture fuzzing, live', () => {
  let h: IngestHarness;
  beforeAll(async () => {
    h = await startIngestHarness({ MAX_BODY_BYTES: '1MiB', SPIKE_EVENTS_PER_SECOND: '0' }, { [KEY]: 1 });
  });
  afterAll(() => h.stop());

  it('fuzz - 150 random requests: no 5xx, every 200 stores exactly its events, the node stays ready', async () => {
    const storedByMarker = async () => {
      const counts = new Map<string, number>();
      for (const e of await h.events('events')) {
        const marker = (e.properties as { fuzz_marker?: string }).fuzz_marker;
        if (marker) counts.set(marker, (counts.get(marker) ?? 0) + 1);
      }
      return counts;
    };
    const expected = new Map<string, number>();
    await fc.assert(
      fc.asyncProperty(fuzzRequestArb(KEY), async (r) => {
        const res = await fetch(`${h.url}${r.route}${r.query ? `?${r.query}` : ''}`, { method: 'POST', body: r.body, headers: r.headers });
        const text = await res.text();
        expect(res.status, text).toBeLessThan(500);
        if (res.status === 200 && r.marker !== undefined) expected.set(r.marker, r.expectedEvents);
      }),
      { numRuns: 150 },
    );
    const stored = await storedByMarker();
    for (const [marker, count] of expected) expect(stored.get(marker) ?? 0, marker).toBe(count);
    expect((await fetch(`${h.url}/_ready`)).status).toBe(200);
  });
});
