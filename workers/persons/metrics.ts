// Metrics of person processing, on the worker's registry (coordination/metrics.ts).
import { Counter, Gauge, Histogram, type Registry } from '../../lib/index.js';

/** What a partition this worker runs reports at each scrape. */
export interface PartitionGauges {
  stream: string;
  shard: number;
  /** Last committed stream sequence. */
  position: number;
  /** Messages of the shard in the stream and not yet processed, as last known (undefined: no consumer open). */
  lag: number | undefined;
}

export function createPersonMetrics(registry: Registry) {
  const r = [registry];
  // Read from the running partitions at scrape time: a shard this worker no longer runs drops out
  // instead of keeping its last value, and a retrying shard keeps showing what it has not processed
  // (lag counts what the server had left when it sent the last message received, plus the buffer).
  const partitions = new Set<() => PartitionGauges>();
  const collectPartitions = function (this: Gauge, pick: (g: PartitionGauges) => number | undefined) {
    this.reset();
    for (const read of partitions) {
      const g = read();
      const value = pick(g);
      if (value !== undefined) this.set({ stream: g.stream, shard: String(g.shard) }, value);
    }
  };
  let batchSlots: () => { active: number; waiting: number } = () => ({ active: 0, waiting: 0 });
  return {
    /** Reports the batches in flight and waiting for a turn (WORKER_BATCH_CONCURRENCY). */
    trackBatchSlots(read: () => { active: number; waiting: number }): void {
      batchSlots = read;
    },
    batchesInFlight: new Gauge({
      name: 'spate_worker_batches_in_flight',
      help: 'Batches being processed now (at most WORKER_BATCH_CONCURRENCY)',
      registers: r,
      collect() {
        this.set(batchSlots().active);
      },
    }),
    batchesWaiting: new Gauge({
      name: 'spate_worker_batches_waiting',
      help: 'Shards with a batch ready and waiting for a turn: above zero for long, the worker is behind',
      registers: r,
      collect() {
        this.set(batchSlots().waiting);
      },
    }),
    /** Reports a running partition's position and lag until the returned function is called. */
    trackPartition(read: () => PartitionGauges): () => void {
      partitions.add(read);
      return () => partitions.delete(read);
    },
    consumerLag: new Gauge({
      name: 'spate_worker_consumer_lag_messages',
      help: 'Messages of a (stream, shard) stored in JetStream and not yet processed by this worker',
      labelNames: ['stream', 'shard'],
      registers: r,
      collect() {
        collectPartitions.call(this, (g) => g.lag);
      },
    }),
    position: new Gauge({
      name: 'spate_worker_position',
      help: 'Last committed stream sequence of a (stream, shard) owned by this worker',
      labelNames: ['stream', 'shard'],
      registers: r,
      collect() {
        collectPartitions.call(this, (g) => g.position);
      },
    }),
    feedResumes: new Counter({
      name: 'spate_worker_feed_resumes_total',
      help: 'Shard consumers replaced from the next sequence, buffer kept, after a pull ended short (409) and nats.js did not pull again',
      labelNames: ['stream'],
      registers: r,
    }),
    feedRestarts: new Counter({
      name: 'spate_worker_feed_restarts_total',
      help: 'Shard consumers opened again because a message in the stream never arrived (lost when NATS cut a slow connection, or bigger than a pull)',
      labelNames: ['stream'],
      registers: r,
    }),
    processingLatency: new Histogram({
      name: 'spate_worker_processing_latency_seconds',
      help: 'From JetStream storing a source message to its processed events being acknowledged on PROCESSED',
      labelNames: ['stream'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: r,
    }),
    batchDuration: new Histogram({
      name: 'spate_worker_batch_duration_seconds',
      help: 'Time to process and commit one batch',
      labelNames: ['stream'],
      buckets: [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: r,
    }),
    batchPhase: new Histogram({
      name: 'spate_worker_batch_phase_seconds',
      help: 'Time of each phase of a batch (prepare, connect, lock, dedup, load, compute, write, publish, commit)',
      labelNames: ['phase'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers: r,
    }),
    batchEvents: new Histogram({
      name: 'spate_worker_batch_events',
      help: 'Events per batch',
      buckets: [1, 10, 100, 500, 1000, 2500, 5000, 10000, 25000],
      registers: r,
    }),
    transactionBatches: new Histogram({
      name: 'spate_worker_transaction_batches',
      help: 'Batches (of different shards and streams) committed in one transaction: above 1 when small batches ready together share one',
      buckets: [1, 2, 4, 8, 16, 32, 64],
      registers: r,
    }),
    eventsProcessed: new Counter({
      name: 'spate_worker_events_processed_total',
      help: 'Events processed, by kind (custom, identify, create_alias, merge_dangerously, groupidentify, personless, dropped, duplicate, malformed, failed: left out because processing it fails every time)',
      labelNames: ['kind'],
      registers: r,
    }),
    warnings: new Counter({
      name: 'spate_worker_ingestion_warnings_total',
      help: 'Ingestion warnings recorded, by type',
      labelNames: ['type'],
      registers: r,
    }),
    batchRetries: new Counter({
      name: 'spate_worker_batch_retries_total',
      help: 'Batches redone, by reason (conflict: another writer changed a person; unavailable: Postgres or NATS down; shared: a transaction shared with other shards\' batches failed, each runs again alone; error)',
      labelNames: ['reason'],
      registers: r,
    }),
    personCache: new Counter({
      name: 'spate_worker_person_cache_lookups_total',
      help: 'Distinct id lookups answered by the person cache (hit) or Postgres (miss)',
      labelNames: ['result'],
      registers: r,
    }),
    isolationTrials: new Counter({
      name: 'spate_worker_isolation_trials_total',
      help: 'Trial runs (rolled back) of a batch that fails on its own content, to find the events that make it fail',
      registers: r,
    }),
    publishDuplicates: new Counter({
      name: 'spate_worker_publish_duplicates_total',
      help: 'PROCESSED messages JetStream dropped as duplicates (a replayed batch)',
      registers: r,
    }),
  };
}

export type PersonMetrics = ReturnType<typeof createPersonMetrics>;
