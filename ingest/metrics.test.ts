import { describe, expect, it } from 'vitest';
import { createIngestMetrics } from './metrics.js';

/** A metric's samples from the exposition text, by their label text ('' without labels). */
async function samples(metrics: ReturnType<typeof createIngestMetrics>, name: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const line of (await metrics.registry.metrics()).split('\n')) {
    const m = new RegExp(`^${name}(?:\\{(.*)\\})? (\\S+)$`).exec(line);
    if (m) out.set((m[1] ?? '').replace(/,?deployable="ingest"/, ''), Number(m[2]));
  }
  return out;
}

describe('ingest metrics', () => {
  it('metrics - counts made on the hot path show as totals at every scrape, never counted twice', async () => {
    const metrics = createIngestMetrics();
    metrics.requests.of('capture', 200).inc();
    metrics.requests.of('capture', 200).inc();
    metrics.requests.of('batch', 503).inc();
    metrics.bytesIn.inc(450);
    expect(await samples(metrics, 'spate_ingest_requests_total')).toEqual(
      new Map([
        ['route="capture",status="200"', 2],
        ['route="batch",status="503"', 1],
      ]),
    );
    // A second scrape with one more request: the totals, not the counts since the last scrape.
    metrics.requests.of('capture', 200).inc();
    metrics.bytesIn.inc(50);
    expect((await samples(metrics, 'spate_ingest_requests_total')).get('route="capture",status="200"')).toBe(3);
    expect((await samples(metrics, 'spate_ingest_bytes_in_total')).get('')).toBe(500);
    expect((await samples(metrics, 'spate_ingest_requests_total')).get('route="batch",status="503"')).toBe(1);
  });
});
