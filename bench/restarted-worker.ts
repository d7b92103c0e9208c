// `node dist/bench/restarted-worker.js [options]` — how soon a worker that starts on an existing
// cluster reaches its steady CPU per event: what a deploy or a crash costs in production.
//
// The e2e stage reports a fresh worker on a fresh cluster: its first ~60k events of the realistic
// mix also create most of the mix's 20,000 persons (inserts, not updates), so that figure mixes a
// new process's start (V8 optimising its code, an empty person cache) with a workload that gets
// cheaper as the persons come to exist. Here a local cluster (as `npm start` runs it) is warmed up
// first, then its worker is stopped (SIGTERM) and the launcher starts a new one, several times;
// each new worker gets the same paced load, and its CPU per event over each 10k of its events is
// read from /proc. The new worker first takes a small probe (its shards taken over, the load
// flowing), measured apart: its start-up.
import { join, resolve } from 'node:path';
import { readClusterFile } from '../lib/index.js';
import { parseBenchArgs, usageError } from './lib/cli.js';
import { cpuSeconds, scratchDir } from './lib/processes.js';
import { markdownTable, median } from './lib/report.js';
import { freshWorkerRatio } from './lib/suite-report.js';
import { startClusterUnderTest } from './scenarios/e2e-cluster.js';
import { PipelineSession } from './scenarios/e2e-pipeline.js';

const USAGE = `usage: node dist/bench/restarted-worker.js [--restarts N] [--events N] [--rate N] [--probe N] [--checkout DIR]

Starts a local cluster (1 ingest node, 1 worker), sends it --events events of the realistic mix
at --rate (the first worker: a fresh cluster), then --restarts times stops the worker, waits for
the launcher's new one to process a probe of --probe events, and sends it --events more at
--rate. Prints each worker's CPU µs per event per 10k of its events, and 20k–40k ÷ 40k–100k.

  --restarts N   workers started on the warmed-up cluster (default 3)
  --events N     events each worker is measured over (default 100000)
  --rate N       events/s offered (default 5000, as the e2e stage's warm-up)
  --probe N      events the new worker processes before it is measured (default 2000)
  --checkout DIR the build whose cluster is measured (a checkout with dist/ built; default this one)
  -h, --help     this text`;

const { values: args } = parseBenchArgs(USAGE, {
  options: {
    restarts: { type: 'string', default: '3' },
    events: { type: 'string', default: '100000' },
    rate: { type: 'string', default: '5000' },
    probe: { type: 'string', default: '2000' },
    checkout: { type: 'string' },
  },
});
const restarts = Number(args.restarts);
const events = Number(args.events);
const rate = Number(args.rate);
const probe = Number(args.probe);
if (!(Number.isInteger(restarts) && restarts > 0) || !(events >= 60_000) || !(rate > 0) || !(probe > 0)) {
  usageError(USAGE, '--restarts must be a positive integer, --events at least 60000 (the ratio needs 6 windows of 10k), --rate and --probe positive');
}

const log = (m: string) => console.error(`[restarted-worker ${new Date().toISOString().slice(11, 19)}] ${m}`);
const dir = scratchDir('restarted-worker');
const dataDir = join(dir, 'cluster');

/** The worker's pid in cluster.json once it is not `old` (the launcher rewrites it at every start). */
async function nextWorkerPid(old: number): Promise<number> {
  const until = Date.now() + 60_000;
  for (;;) {
    const pid = readClusterFile(join(dataDir, 'cluster.json')).processes?.find((p) => p.role === 'worker')?.pid;
    if (pid !== undefined && pid !== old) return pid;
    if (Date.now() > until) throw new Error('the launcher started no new worker within 60 s');
    await new Promise((r) => setTimeout(r, 100));
  }
}

interface Row {
  worker: string;
  startUs: number;
  buckets: number[];
}

const rows: Row[] = [];
const cluster = await startClusterUnderTest({ dataDir, log, checkout: args.checkout && resolve(args.checkout) });
const session = await PipelineSession.open(cluster.target, { log });
try {
  // The target's processes are read for CPU by pid: the worker's entry follows the restarts.
  const worker = cluster.target.processes.find((p) => p.role === 'worker')!;
  const first = await session.warmUp(events, rate);
  rows.push({ worker: 'first (fresh cluster)', startUs: Number.NaN, buckets: first.workerUsPer10k });
  for (let i = 1; i <= restarts; i++) {
    const old = worker.pid;
    log(`stopping worker ${old}`);
    process.kill(old, 'SIGTERM');
    worker.pid = await nextWorkerPid(old);
    log(`new worker ${worker.pid}`);
    // Start-up and taking over the shards, until a probe of events came through.
    await session.warmUp(probe, rate);
    const startUs = cpuSeconds(worker.pid) * 1e6;
    const measured = await session.warmUp(events, rate);
    rows.push({ worker: `restart ${i}`, startUs, buckets: measured.workerUsPer10k });
  }
} finally {
  await session.close().catch(() => undefined);
  await cluster.stop().catch(() => undefined);
}

const windows = Math.max(...rows.map((r) => r.buckets.length));
const columns = ['worker', 'CPU to start and take a probe, ms', ...Array.from({ length: windows }, (_, i) => `${i * 10}–${i * 10 + 10}k`), '20k–40k ÷ 40k–100k'];
const restarted = rows.slice(1).map((r) => freshWorkerRatio(r.buckets));
console.log(
  [
    markdownTable({
      title: `Worker CPU µs per event per 10k of its events, ${rate.toLocaleString('en-US')} events/s offered (probe of ${probe.toLocaleString('en-US')} events before each restarted worker is measured)`,
      columns,
      rows: rows.map((r) => [r.worker, r.startUs / 1000, ...Array.from({ length: windows }, (_, i) => r.buckets[i] ?? Number.NaN), freshWorkerRatio(r.buckets)]),
    }),
    `Restarted workers, median of 20k–40k ÷ 40k–100k: ${median(restarted).toFixed(2)}× (${restarted.map((x) => x.toFixed(2)).join(', ')})`,
  ].join('\n\n'),
);
process.exit(0);
