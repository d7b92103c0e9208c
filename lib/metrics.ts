// Prometheus metrics: one registry per process, with Node's default metrics, served at /metrics.
import { collectDefaultMetrics, Registry } from 'prom-client';

export { Counter, Gauge, Histogram, Registry } from 'prom-client';

export function createMetricsRegistry(deployable: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ deployable });
  // The event-loop delay is sampled every 50 ms, not every 10 (prom-client's default): each sample
  // wakes an idle process, and at 10 ms that cost a Spate process ~3.5 ms of CPU per second
  // (bench/idle-cluster.ts). A stall still shows in full when it ends; 20 samples a second keep
  // the p99 of a 15 s scrape meaningful.
  collectDefaultMetrics({ register: registry, prefix: 'spate_', eventLoopMonitoringPrecision: 50 });
  return registry;
}
