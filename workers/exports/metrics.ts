// The exports role's metrics, on the worker's registry (/metrics).
import { Counter, Gauge, Histogram, type Registry } from '../../lib/index.js';

export function createExportMetrics(registry: Registry, lagSeconds: () => Array<{ exportId: string; seconds: number }>) {
  const r = [registry];
  return {
    runs: new Counter({ name: 'spate_export_runs_total', help: 'Batch export runs that ended, by destination type and status (FailedRetryable: an attempt that will be retried)', labelNames: ['destination', 'status'], registers: r }),
    records: new Counter({ name: 'spate_export_records_total', help: 'Records delivered by completed runs, by destination type', labelNames: ['destination'], registers: r }),
    bytes: new Counter({ name: 'spate_export_bytes_total', help: 'Bytes delivered by completed runs (after format and compression), by destination type', labelNames: ['destination'], registers: r }),
    runSeconds: new Histogram({
      name: 'spate_export_run_duration_seconds',
      help: 'Time of one attempt of a run, by destination type',
      labelNames: ['destination'],
      buckets: [0.05, 0.25, 1, 5, 15, 60, 300, 1800],
      registers: r,
    }),
    owned: new Gauge({ name: 'spate_export_owned', help: 'Batch exports whose lease this worker holds', registers: r }),
    lag: new Gauge({
      name: 'spate_export_lag_seconds',
      help: 'Per export this worker holds: seconds from the end of its last completed scheduled interval to now (how far behind it is)',
      labelNames: ['export_id'],
      registers: r,
      collect() {
        this.reset();
        for (const { exportId, seconds } of lagSeconds()) this.set({ export_id: exportId }, seconds);
      },
    }),
  };
}

export type ExportMetrics = ReturnType<typeof createExportMetrics>;
