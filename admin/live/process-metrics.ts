// Reads the /metrics of the cluster's ingest nodes and workers (CLUSTER_METRICS_URLS) and keeps
// the few figures the live page shows: the same counters and gauges Prometheus scrapes.
import parsePrometheusTextFormat, { type MetricFamily } from 'parse-prometheus-text-format';

export type ProcessRole = 'ingest' | 'worker' | 'unknown';

export interface ProcessMetrics {
  url: string;
  /** Answered with metrics this time. */
  up: boolean;
  role: ProcessRole;
  /** spate_ingest_events_accepted_total, every stream (ingest nodes). */
  eventsAccepted: number;
  /** spate_worker_events_processed_total, every kind (workers). */
  eventsProcessed: number;
  /** spate_worker_consumer_lag_messages by shard, summed over the streams (workers). */
  lagByShard: Map<number, number>;
  /** Shards this worker runs now (the shards of its spate_worker_position series). */
  shards: number[];
}

/** How long one scrape may take: a process that does not answer in time counts as down. */
const SCRAPE_TIMEOUT_MS = 1_500;

function sum(family: MetricFamily | undefined): number {
  let total = 0;
  for (const m of family?.metrics ?? []) total += Number(m.value ?? 0);
  return total;
}

/** The figures of one process's metrics text. */
export function readProcessMetrics(url: string, text: string): ProcessMetrics {
  const families = new Map(parsePrometheusTextFormat(text).map((f) => [f.name, f]));
  const accepted = families.get('spate_ingest_events_accepted_total');
  const processed = families.get('spate_worker_events_processed_total');
  const role: ProcessRole = families.has('spate_ingest_requests_total') ? 'ingest' : families.has('spate_worker_owned_shards') ? 'worker' : 'unknown';
  const lagByShard = new Map<number, number>();
  for (const m of families.get('spate_worker_consumer_lag_messages')?.metrics ?? []) {
    const shard = Number(m.labels?.shard);
    if (Number.isInteger(shard)) lagByShard.set(shard, (lagByShard.get(shard) ?? 0) + Number(m.value ?? 0));
  }
  const shards = new Set<number>();
  for (const m of families.get('spate_worker_position')?.metrics ?? []) {
    const shard = Number(m.labels?.shard);
    if (Number.isInteger(shard)) shards.add(shard);
  }
  return { url, up: true, role, eventsAccepted: sum(accepted), eventsProcessed: sum(processed), lagByShard, shards: [...shards].sort((a, b) => a - b) };
}

function down(url: string): ProcessMetrics {
  return { url, up: false, role: 'unknown', eventsAccepted: 0, eventsProcessed: 0, lagByShard: new Map(), shards: [] };
}

/** Every target's figures, read at once; one that fails or is slow is reported down. */
export async function scrapeProcesses(urls: readonly string[]): Promise<ProcessMetrics[]> {
  return Promise.all(
    urls.map(async (url) => {
      try {
        const res = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(SCRAPE_TIMEOUT_MS) });
        if (!res.ok) return down(url);
        return readProcessMetrics(url, await res.text());
      } catch {
        return down(url);
      }
    }),
  );
}
