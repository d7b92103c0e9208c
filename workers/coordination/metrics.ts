// The worker's Prometheus registry (served at /metrics) and the metrics of the coordination every
// role shares. Each role adds its own metrics to the same registry (e.g. persons/metrics.ts).
import { Counter, Gauge, createMetricsRegistry, type Registry } from '../../lib/index.js';

export function createWorkerRegistry(): Registry {
  return createMetricsRegistry('worker');
}

export function createCoordinationMetrics(registry: Registry = createWorkerRegistry()) {
  const r = [registry];
  return {
    registry,
    ownedShards: new Gauge({ name: 'spate_worker_owned_shards', help: 'Shards whose lease this worker holds', registers: r }),
    leaseChanges: new Counter({
      name: 'spate_worker_lease_changes_total',
      help: 'Leases (shards, and any other lease set a role holds) acquired, released or lost',
      labelNames: ['change'],
      registers: r,
    }),
  };
}

export type CoordinationMetrics = ReturnType<typeof createCoordinationMetrics>;
