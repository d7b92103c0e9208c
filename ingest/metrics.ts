// Prometheus metrics of an ingest node, served at GET /metrics.
import { Counter, Gauge, Histogram, createMetricsRegistry, type Registry } from '../lib/index.js';

export interface IngestMetrics {
  registry: Registry;
  /** spate_ingest_requests_total by (route, status): counted on the hot path (see Tallies). */
  requests: Tallies;
  /** spate_ingest_events_accepted_total by stream. */
  eventsAccepted: Tallies;
  eventsDropped: Counter<'reason'>;
  projectLimited: Counter<'project' | 'limit'>;
  /** spate_ingest_bytes_in_total. */
  bytesIn: Tally;
  publishLatency: Histogram;
  messagesPublished: Counter;
  eventsPublished: Counter;
  publishRetries: Counter;
  publishFailures: Counter;
  publishDuplicates: Counter;
  poolQueueDepth: Gauge;
  /** spate_ingest_parses_total by where (inline, thread). */
  parses: Tallies;
  /** Read when scraped (set it in a collect hook or before the scrape). */
  inflightBytes: Gauge;
  requestDuration: Histogram<'route'>;
}

/** One label combination's count, added to its counter when the counter is scraped. */
export class Tally {
  pending = 0;
  constructor(readonly labels: Readonly<Record<string, string>>) {}

  inc(by = 1): void {
    this.pending += by;
  }
}

/**
 * A counter's counts on the hot path. prom-client resolves label values on every inc() (~130 ns
 * with two labels, measured 2026-11-26: more than routing a small capture request), so hot paths
 * add to a plain number per label combination instead, and the counter takes what they counted
 * whenever it is scraped (its collect hook): /metrics shows the same totals.
 */
export class Tallies {
  // One map level per label value: no key string to build on the hot path.
  private readonly root = new Map<string | number, unknown>();
  private readonly all: Tally[] = [];
  private unlabelled: Tally | undefined;

  constructor(private readonly labelNames: readonly string[]) {}

  /** The tally of these label values (numbers are shown as their decimal text). */
  of(...values: (string | number)[]): Tally {
    if (values.length === 0) return (this.unlabelled ??= this.add([]));
    let level = this.root;
    for (let i = 0; i < values.length - 1; i++) {
      let next = level.get(values[i]!) as Map<string | number, unknown> | undefined;
      if (!next) level.set(values[i]!, (next = new Map()));
      level = next;
    }
    const last = values[values.length - 1]!;
    let tally = level.get(last) as Tally | undefined;
    if (!tally) level.set(last, (tally = this.add(values)));
    return tally;
  }

  private add(values: readonly (string | number)[]): Tally {
    const tally = new Tally(Object.fromEntries(this.labelNames.map((name, i) => [name, String(values[i])])));
    this.all.push(tally);
    return tally;
  }

  /** Adds what was counted since the last scrape to `counter`. */
  flushInto(counter: { inc(labels: Record<string, string>, value: number): void }): void {
    for (const tally of this.all) {
      if (tally.pending === 0) continue;
      counter.inc({ ...tally.labels }, tally.pending);
      tally.pending = 0;
    }
  }
}

/** Metric children bound to their labels once (prom-client looks children up on every labels() call). */
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
  /** A counter whose counts come from tallies (see Tallies). */
  const tallied = (name: string, help: string, labelNames: string[]): Tallies => {
    const tallies = new Tallies(labelNames);
    new Counter({
      name,
      help,
      labelNames,
      registers: r,
      collect() {
        tallies.flushInto(this);
      },
    });
    return tallies;
  };
  return {
    registry,
    requests: tallied('spate_ingest_requests_total', 'Capture requests by route and HTTP status', ['route', 'status']),
    eventsAccepted: tallied('spate_ingest_events_accepted_total', 'Events acknowledged by JetStream, by stream', ['stream']),
    eventsDropped: new Counter({ name: 'spate_ingest_events_dropped_total', help: 'Events not ingested (request still 200), by reason', labelNames: ['reason'], registers: r }),
    projectLimited: new Counter({
      name: 'spate_ingest_project_limited_events_total',
      help: "Events held back by their project's limits, by project id and limit: refused with 429 (events_per_second, historical_messages_per_second) or dropped with 200 (events_per_day)",
      labelNames: ['project', 'limit'],
      registers: r,
    }),
    bytesIn: tallied('spate_ingest_bytes_in_total', 'Request body bytes received', []).of(),
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
    parses: tallied('spate_ingest_parses_total', 'Request bodies parsed, on the event loop (small plain JSON) or in a parse thread', ['where']),
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
