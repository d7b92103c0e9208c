// The metrics of what the holders of plugin configs do (destinations, scheduled tasks, jobs),
// on the worker's registry (/metrics).
import { Counter, Gauge, Histogram, type Registry } from '../../lib/index.js';

export interface DeliveryLag {
  configId: number;
  /** Messages of the project PROCESSED holds past what is delivered. */
  messages: number;
  /** Age of the oldest event not yet delivered (0 when nothing waits). */
  seconds: number;
}

export function createHeldMetrics(registry: Registry, held: () => number, lags: () => DeliveryLag[]) {
  const r = [registry];
  return {
    delivered: new Counter({
      name: 'spate_worker_plugin_delivered_total',
      help: 'Processed events a destination took, by method: onEvent (returned), composeWebhook (its webhook answered 2xx)',
      labelNames: ['method'],
      registers: r,
    }),
    skipped: new Counter({
      name: 'spate_worker_plugin_delivery_skipped_total',
      help: 'Processed events composeWebhook returned null for (nothing to send)',
      registers: r,
    }),
    failed: new Counter({
      name: 'spate_worker_plugin_delivery_failed_total',
      help: 'Processed events a destination gave up on after its attempts (an ERROR in the config\'s logs names each), by method and reason: error (threw), timeout, status (the webhook was answered otherwise than 2xx), network, refused (egress policy), invalid (composeWebhook returned what is not a webhook)',
      labelNames: ['method', 'reason'],
      registers: r,
    }),
    retries: new Counter({
      name: 'spate_worker_plugin_delivery_retries_total',
      help: 'Events a destination tried again after a failure, by method',
      labelNames: ['method'],
      registers: r,
    }),
    webhookSeconds: new Histogram({
      name: 'spate_worker_plugin_webhook_seconds',
      help: "Time of one webhook request composeWebhook asked for, until its answer's end",
      buckets: [0.001, 0.005, 0.025, 0.1, 0.5, 2, 10],
      registers: r,
    }),
    lagMessages: new Gauge({
      name: 'spate_worker_plugin_delivery_lag_messages',
      help: 'PROCESSED messages of the project past what the destination delivered, by plugin config (configs this worker holds)',
      labelNames: ['plugin_config'],
      registers: r,
      collect() {
        this.reset();
        for (const l of lags()) this.set({ plugin_config: String(l.configId) }, l.messages);
      },
    }),
    lagSeconds: new Gauge({
      name: 'spate_worker_plugin_delivery_lag_seconds',
      help: 'Age of the oldest processed event the destination has not delivered yet, by plugin config (0: caught up)',
      labelNames: ['plugin_config'],
      registers: r,
      collect() {
        this.reset();
        for (const l of lags()) this.set({ plugin_config: String(l.configId) }, l.seconds);
      },
    }),
    tasks: new Counter({
      name: 'spate_worker_plugin_task_runs_total',
      help: 'Scheduled task runs, by task (runEveryMinute, runEveryHour, runEveryDay) and outcome: ok, failed',
      labelNames: ['task', 'outcome'],
      registers: r,
    }),
    jobs: new Counter({
      name: 'spate_worker_plugin_jobs_total',
      help: 'Job requests run, by outcome: ok, failed, unknown (the plugin exports no such job)',
      labelNames: ['outcome'],
      registers: r,
    }),
    held: new Gauge({
      name: 'spate_worker_plugin_held_configs',
      help: 'Plugin configs whose lease this worker holds (it runs their destination, scheduled tasks and jobs)',
      registers: r,
      collect() {
        this.set(held());
      },
    }),
  };
}

export type HeldMetrics = ReturnType<typeof createHeldMetrics>;
