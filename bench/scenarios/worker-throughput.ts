// Worker throughput comes from bench/workers (written with the workers): a module exporting
// runWorkerThroughput(options). The suite calls it when it is there and reports what it returns
// (a table {title, columns, rows}, or {table, …}); without it the report says it was not run.
import { pathToFileURL } from 'node:url';
import { runtimeModule } from '../../lib/index.js';
import type { Table } from '../lib/report.js';

export interface WorkerBenchOptions {
  natsUrl: string;
  quick: boolean;
  durationS: number;
  runs: number;
  log: (m: string) => void;
}

const isTable = (x: unknown): x is Table =>
  typeof x === 'object' && x !== null && typeof (x as Table).title === 'string' && Array.isArray((x as Table).columns) && Array.isArray((x as Table).rows);

export async function runWorkerBench(fromUrl: string, options: WorkerBenchOptions): Promise<{ table?: Table; data: unknown }> {
  for (const candidate of ['./workers/index', './workers/throughput', './workers/run']) {
    let path: string;
    try {
      path = runtimeModule(fromUrl, candidate).path;
    } catch {
      continue; // not in this checkout
    }
    const mod = (await import(pathToFileURL(path).href)) as { runWorkerThroughput?: (o: WorkerBenchOptions) => Promise<unknown> };
    if (typeof mod.runWorkerThroughput !== 'function') continue;
    options.log('worker throughput (bench/workers)');
    const result = await mod.runWorkerThroughput(options);
    const table = isTable(result) ? result : isTable((result as { table?: unknown } | undefined)?.table) ? (result as { table: Table }).table : undefined;
    return { table, data: result };
  }
  return { data: 'not run: bench/workers is not in this checkout' };
}
