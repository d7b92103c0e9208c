import { describe, expect, it } from 'vitest';
import { freshDatabase, startNats, waitFor } from '../test/kit/index.js';
import { capture, connectAndCreateStreams, publishEvents, testDeps, workerConfig } from '../test/workers/harness.js';
import { startWorker } from './index.js';

describe('worker status server', () => {
  it('status - /metrics reports lag per shard, latency, events by kind, warnings and owned shards; /_health, /_ready, errors', async () => {
    await using nats = await startNats();
    const { nc, js } = await connectAndCreateStreams(nats.url);
    const worker = await startWorker(workerConfig(nats.url, await freshDatabase()), testDeps());
    try {
      expect((await fetch(`${worker.statusUrl}/_health`)).status).toBe(200);
      const ready = await fetch(`${worker.statusUrl}/_ready`);
      expect(ready.status).toBe(200);
      expect(((await ready.json()) as { shards: number[] }).shards).toHaveLength(16);

      await publishEvents(js, [capture(3, '$pageview', 'm1', {}), capture(3, '$identify', 'm1', { $set: { a: 1 } })]);
      let text = '';
      await waitFor('events counted', async () => {
        text = await (await fetch(`${worker.statusUrl}/metrics`)).text();
        return /spate_worker_events_processed_total\{kind="identify"[^}]*\} 1/.test(text);
      });
      expect(text).toMatch(/spate_worker_events_processed_total\{kind="custom"[^}]*\} 1/);
      expect(text).toMatch(/spate_worker_consumer_lag_messages\{stream="EVENTS",shard="\d+"[^}]*\} 0/);
      expect(text).toMatch(/spate_worker_processing_latency_seconds_count\{[^}]*stream="EVENTS"[^}]*\} [1-9]/);
      expect(text).toMatch(/spate_worker_ingestion_warnings_total\{type="missing_required_property"[^}]*\} 1/);
      expect(text).toMatch(/spate_worker_owned_shards\{[^}]*\} 16/);
      expect(text).toMatch(/spate_worker_position\{stream="EVENTS"/);

      const missing = await fetch(`${worker.statusUrl}/nope`);
      expect(missing.status).toBe(404);
      expect(await missing.json()).toMatchObject({ type: 'invalid_request', code: 'not_found', attr: null });
      const post = await fetch(`${worker.statusUrl}/metrics`, { method: 'POST' });
      expect(post.status).toBe(405);
      expect(await post.json()).toMatchObject({ code: 'method_not_allowed' });
    } finally {
      await worker.stop();
      await worker.stop(); // idempotent
      await nc.close();
    }
  });

  it('status - /_ready answers 503 with the stage while the streams are missing', async () => {
    await using nats = await startNats();
    const config = workerConfig(nats.url, await freshDatabase(), { WORKER_METRICS_PORT: String(await (await import('../test/kit/index.js')).freePort()) });
    const starting = startWorker(config, testDeps());
    const url = `http://127.0.0.1:${config.metricsPort}`;
    await waitFor('the status server', async () => (await fetch(`${url}/_health`).catch(() => undefined))?.ok === true);
    let body: unknown;
    await waitFor('the worker to wait for streams', async () => {
      const res = await fetch(`${url}/_ready`);
      expect(res.status).toBe(503);
      body = await res.json();
      return JSON.stringify(body).includes('waiting for streams');
    });
    expect(body).toMatchObject({ type: 'server_error', code: 'not_ready', attr: null });
    const { nc } = await connectAndCreateStreams(nats.url);
    const worker = await starting;
    await waitFor('ready', async () => (await fetch(`${url}/_ready`)).status === 200);
    await worker.stop();
    await nc.close();
  });
});
