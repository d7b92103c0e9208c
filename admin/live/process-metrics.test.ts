// The live page reads what the deployables' real registries print (prom-client's text format).
import { describe, expect, it } from 'vitest';
import { createIngestMetrics } from '../../ingest/metrics.js';
import { createCoordinationMetrics, createWorkerRegistry } from '../../workers/coordination/index.js';
import { createPersonMetrics } from '../../workers/persons/metrics.js';
import { readProcessMetrics } from './process-metrics.js';

describe('live page metrics', () => {
  it('live metrics - an ingest node: its accepted events over every stream', async () => {
    const ingest = createIngestMetrics();
    ingest.requests.of('capture', 200).inc();
    ingest.eventsAccepted.of('events').inc(40);
    ingest.eventsAccepted.of('historical').inc(2);
    const figures = readProcessMetrics('http://i', await ingest.registry.metrics());
    expect(figures).toMatchObject({ url: 'http://i', up: true, role: 'ingest', eventsAccepted: 42, eventsProcessed: 0, shards: [] });
  });

  it('live metrics - a worker: events processed, the shards it runs, lag summed per shard over the streams', async () => {
    const registry = createWorkerRegistry();
    createCoordinationMetrics(registry);
    const persons = createPersonMetrics(registry);
    persons.eventsProcessed.inc({ kind: 'custom' }, 10);
    persons.eventsProcessed.inc({ kind: 'identify' }, 5);
    persons.trackPartition(() => ({ stream: 'EVENTS', shard: 3, position: 9, lag: 7 }));
    persons.trackPartition(() => ({ stream: 'HISTORICAL', shard: 3, position: 1, lag: 2 }));
    persons.trackPartition(() => ({ stream: 'EVENTS', shard: 11, position: 4, lag: undefined }));
    const figures = readProcessMetrics('http://w', await registry.metrics());
    expect(figures).toMatchObject({ role: 'worker', eventsProcessed: 15, shards: [3, 11] });
    expect([...figures.lagByShard]).toEqual([[3, 9]]);
  });
});
