// Prometheus metrics: one registry per process, with Node's default metrics, served at /metrics.
import { collectDefaultMetrics, Registry } from 'prom-client';

export { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** How often the event-loop delay is sampled (deploy/observability's lag panel subtracts it). */
export const EVENT_LOOP_SAMPLE_MS = 50;

export function createMetricsRegistry(deployable: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ deployable });
  // The event loop is sampled every 50 ms, not every 10 (prom-client's default): each sample wakes
  // an idle process, and at 10 ms the ingest node and the admin server spent 4.5 ms of CPU per
  // second on it (bench/idle-cluster.ts). Node's figures are the time between two samples, so
  // `spate_nodejs_eventloop_lag_*` read ~50 ms on an idle process (~10 before); the dashboard's
  // panel subtracts EVENT_LOOP_SAMPLE_MS. A stall delays the sample due during it by up to its whole
  // length (up to 50 ms less; 10 before), and one shorter than 50 ms shows only when a sample falls
  // due during it. 20 samples a second keep a 15 s scrape's p99 meaningful.
  collectDefaultMetrics({ register: registry, prefix: 'spate_', eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
  return registry;
}
