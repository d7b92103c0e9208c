// Scenario: worker throughput (bench/workers/throughput.ts) as a stage of the suite: its own
// nats-server, PostgreSQL and one worker process. --quick drains a smaller backlog with a
// shorter latency phase; the result is folded into the suite's report instead of its own file.
import { QUICK, runWorkerThroughput, type WorkerThroughputResult } from '../workers/throughput.js';

export async function measureWorkerThroughput(o: { quick: boolean; signal: AbortSignal; log: (m: string) => void }): Promise<WorkerThroughputResult> {
  o.log(`worker throughput (bench/workers${o.quick ? ', quick' : ''})`);
  return runWorkerThroughput({ ...(o.quick ? QUICK : {}), writeResults: false, signal: o.signal, log: o.log });
}
