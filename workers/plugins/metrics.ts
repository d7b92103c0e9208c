// The plugin runtime's metrics, on the worker's registry (/metrics).
import { Counter, Gauge, Histogram, type Registry } from '../../lib/index.js';

export function createPluginMetrics(registry: Registry, instances: () => Map<string, number>) {
  const r = [registry];
  return {
    events: new Counter({
      name: 'spate_worker_plugin_events_total',
      help: 'Events a plugin method handled, by method and outcome: ok (unchanged), changed, dropped (processEvent returned null), failed (threw, returned what cannot be used or what makes the event too large, or the runtime failed on its batch), timeout (ran out of CPU or wall time), skipped (the plugin was not ready: being set up again, or disabled; or its change was discarded with that of a plugin that made the event too large or unprocessable)',
      labelNames: ['method', 'outcome'],
      registers: r,
    }),
    batchSeconds: new Histogram({
      name: 'spate_worker_plugin_batch_seconds',
      help: 'Time of one plugin call on a batch of events (the sandbox crossing included), by method',
      labelNames: ['method'],
      buckets: [0.0005, 0.002, 0.01, 0.05, 0.25, 1, 5],
      registers: r,
    }),
    listsOmitted: new Counter({
      name: 'spate_worker_plugin_lists_omitted_total',
      help: 'Events that went on without $plugins_succeeded / $plugins_failed: with them, their line would not fit a PROCESSED message',
      registers: r,
    }),
    setups: new Counter({ name: 'spate_worker_plugin_setups_total', help: 'Plugin instance set-ups (load and setupPlugin), by outcome: ready, failed', labelNames: ['outcome'], registers: r }),
    disabled: new Counter({ name: 'spate_worker_plugin_disabled_total', help: 'Plugin configs this worker gave up and asked the admin server to disable, by reason: setup, breaker', labelNames: ['reason'], registers: r }),
    instances: new Gauge({
      name: 'spate_worker_plugin_instances',
      help: 'Plugin instances on this worker, by state (starting, ready, retrying, failed)',
      labelNames: ['state'],
      registers: r,
      collect() {
        this.reset();
        for (const [state, n] of instances()) this.set({ state }, n);
      },
    }),
  };
}

export type PluginMetrics = ReturnType<typeof createPluginMetrics>;
