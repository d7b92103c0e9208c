// INGEST_METRICS_PORT: the operations routes alone on a port of the node's own, so nodes that share
// one capture port (npm start -- --ingest N) can each be read.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startIngestHarness, type IngestHarness } from '../test/ingest-harness.js';

let h: IngestHarness;
beforeAll(async () => {
  h = await startIngestHarness({ INGEST_METRICS_PORT: '0' }, { phc_ops: 3 });
});
afterAll(() => h?.stop());

describe('ingest metrics port', () => {
  it('metrics port - serves /metrics, /_health and /_ready of this node, and no capture or SDK route', async () => {
    const ops = h.node.metricsUrl!;
    expect(ops).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(ops).not.toBe(h.url);
    await fetch(`${h.url}/capture/`, { method: 'POST', body: JSON.stringify({ api_key: 'phc_ops', event: 'e', distinct_id: 'u' }) });
    const metrics = await (await fetch(`${ops}/metrics`)).text();
    expect(metrics).toMatch(/^spate_ingest_events_accepted_total\{stream="events",deployable="ingest"\} 1$/m);
    expect((await fetch(`${ops}/_health`)).status).toBe(200);
    expect((await fetch(`${ops}/_ready`)).status).toBe(200);
    for (const path of ['/capture/', '/batch/', '/e/', '/flags/?v=2']) {
      expect((await fetch(`${ops}${path}`, { method: 'POST', body: '{}' })).status, path).toBe(404);
    }
    expect((await fetch(`${ops}/array/phc_ops/config`)).status).toBe(404);
  });
});
