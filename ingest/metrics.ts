// Prometheus metrics of an ingest node, served at GET /metrics.
import { Counter, Gauge, Histogram, createMetricsRegistry, type Registry } from '../lib/index.js';

export interface IngestMetrics {
  registry: Registry;
  requests: Counter<'route' | 'status'>;
  eventsAccepted: Counter<'stream'>;
  eventsDropped: Counter<'reason'>;
  projectLimited: Counter<'project' | 'limit'>;
  bytesIn: Counter;
  publishLatency: Histogram;
  messagesPublished: Counter;
  eventsPublished: Counter;
  publishRetries: Counter;
  publishFailures: Counter;
  publishDuplicates: Counter;
  poolQueueDepth: Gauge;
  parses: Counter<'where'>;
  inflightBytes: Gauge;
  requestDuration: Histogram<'route'>;
}

/**
 * prom-client resolves label values on every call, which costs as much as the rest of a small
 * capture request; hot paths use children bound once per label combination instead.
 */
export function boundLabels<C>(metric: { labels(...values: string[]): C }): (...values: string[]) => C {
  // One map level per label value: no key string to build on the hot path.
  type Level = Map<string, Level | C>;
  const root: Level = new Map();
  return (...values) => {
    let level = root;
    for (let i = 0; i < values.length - 1; i++) {
      let next = level.get(values[i]!) as Level | undefined;
      if (!next) level.set(values[i]!, (next = new Map()));
      level = next;
    }
    const last = values[values.length - 1]!;
    let child = level.get(last) as C | undefined;
    if (child === undefined) level.set(last, (child = metric.labels(...values)));
    return child;
  };
}

export function createIngestMetrics(): IngestMetrics {
  const registry = createMetricsRegistry('ingest');
  const r = [registry];
  return {
    registry,
    requests: new Counter({ name: 'spate_ingest_requests_total', help: 'Capture requests by route and HTTP status', labelNames: ['route', 'status'], registers: r }),
    eventsAccepted: new Counter({ name: 'spate_ingest_events_accepted_total', help: 'Events acknowledged by JetStream, by stream', labelNames: ['stream'], registers: r }),
    eventsDropped: new Counter({ name: 'spate_ingest_events_dropped_total', help: 'Events not ingested (request still 200), by reason', labelNames: ['reason'], registers: r }),
    projectLimited: new Counter({
      name: 'spate_ingest_project_limited_events_total',
      help: "Events held back by their project's limits, by project id and limit: refused with 429 (events_per_second, historical_messages_per_second) or dropped with 200 (events_per_day)",
      labelNames: ['project', 'limit'],
      registers: r,
    }),
    bytesIn: new Counter({ name: 'spate_ingest_bytes_in_total', help: 'Request body bytes received', registers: r }),
    publishLatency: new Histogram({
      name: 'spate_ingest_publish_seconds',
      help: 'JetStream publish latency per message, including retries',
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: r,
    }),
    messagesPublished: new Counter({ name: 'spate_ingest_messages_published_total', help: 'JetStream messages acknowledged', registers: r }),
    eventsPublished: new Counter({ name: 'spate_ingest_events_published_total', help: 'Events in acknowledged JetStream messages', registers: r }),
    publishRetries: new Counter({ name: 'spate_ingest_publish_retries_total', help: 'JetStream publish attempts that failed and were retried', registers: r }),
    publishFailures: new Counter({ name: 'spate_ingest_publish_failures_total', help: 'Messages given up on (their requests got 503)', registers: r }),
    publishDuplicates: new Counter({
      name: 'spate_ingest_publish_duplicates_total',
      help: 'Messages JetStream already held under the same id (a retried publish, or historical events sent again): stored once',
      registers: r,
    }),
    poolQueueDepth: new Gauge({ name: 'spate_ingest_parse_queue_depth', help: 'Bodies waiting for a parse thread', registers: r }),
    parses: new Counter({ name: 'spate_ingest_parses_total', help: 'Request bodies parsed, on the event loop (small plain JSON) or in a parse thread', labelNames: ['where'], registers: r }),
    inflightBytes: new Gauge({ name: 'spate_ingest_inflight_bytes', help: 'Request bytes currently held (reading, parsing, publishing)', registers: r }),
    requestDuration: new Histogram({
      name: 'spate_ingest_request_seconds',
      help: 'Time from the end of the body to the answer',
      labelNames: ['route'],
      buckets: [0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: r,
    }),
  };
}
