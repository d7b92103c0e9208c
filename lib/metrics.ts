// Prometheus metrics: one registry per process, with Node's default metrics, served at /metrics.
import { collectDefaultMetrics, Registry } from 'prom-client';

export { Counter, Gauge, Histogram, Registry } from 'prom-client';

export function createMetricsRegistry(deployable: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ deployable });
  collectDefaultMetrics({ register: registry, prefix: 'spate_' });
  return registry;
}
