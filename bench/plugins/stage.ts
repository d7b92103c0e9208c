// The plugins stage of `npm run bench`: what one transformation adds to the worker's batch path
// (worker-cost.ts, side by side with no plugin in the same process) and what a sandbox call costs
// by what the plugin does (sandbox-cost.ts).
import type { Table } from '../lib/report.js';
import { runSandboxCost, type SandboxCostRow } from './sandbox-cost.js';
import { runWorkerPluginCost, type WorkerPluginCostRow } from './worker-cost.js';

export interface PluginBenchResult {
  name: 'plugins';
  at: string;
  /** CPU µs per event of the worker's batch path without plugins. */
  withoutUs: number;
  worker: WorkerPluginCostRow[];
  sandbox: SandboxCostRow[];
}

export async function runPluginBench(options: { quick: boolean; log: (line: string) => void }): Promise<PluginBenchResult> {
  options.log(`plugins: the worker's batch path with and without one transformation`);
  const { withoutUs, rows } = await runWorkerPluginCost(options.quick ? 2 : 10, options.quick ? 2_000 : 8_000, options.quick ? 2 : 9);
  options.log('plugins: sandbox cost by what the plugin does');
  const sandbox = await runSandboxCost(options.quick ? 200 : 1_000, options.quick ? 2 : 7);
  return { name: 'plugins', at: new Date().toISOString(), withoutUs, worker: rows, sandbox };
}

export function pluginBenchTables(result: PluginBenchResult): Table[] {
  return [
    {
      title: 'Plugins: what one transformation adds to the worker (bench/plugins/worker-cost.ts)',
      note: `CPU µs per event of the worker's in-process batch path (parse, hooks, persons, pack; no PostgreSQL or NATS), fastest of the rounds, with and without the plugin in turns in one process. Without plugins: ${result.withoutUs} µs/event. Target: a trivial transformation adds ≤ 2 µs.`,
      columns: ['transformation', 'µs/event', 'added µs/event'],
      rows: result.worker.map((r) => [r.case, r.usPerEvent, r.addedUs]),
    },
    {
      title: 'Plugins: one sandbox call by what the plugin does (bench/plugins/sandbox-cost.ts)',
      note: 'CPU µs per event of one sandbox call on a batch of events, and of a call on a batch of one event (the crossing).',
      columns: ['plugin', 'µs/event', '1-event call µs'],
      rows: result.sandbox.map((r) => [r.case, r.perEventUs, r.perCallUs]),
    },
  ];
}
