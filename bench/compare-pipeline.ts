// `node dist/bench/compare-pipeline.js --before DIR --after DIR [options]` — the whole pipeline
// (capture → PROCESSED) of two builds, measured alternately in one run. Each build runs as a
// local cluster of its own (its launcher: nats-server, PostgreSQL, admin, one ingest node, one
// worker), both started and warmed up first; then, round after round, each gets the same
// constant offered rate of /batch/ of 1,000 realistic events (which goes first alternates),
// and optionally capture flat out with the workers running. On a host whose throughput moves 2×
// between hours, CPU per event from /proc, measured turn about, is what tells two builds apart.
import { join, resolve } from 'node:path';
import { parseBenchArgs, usageError } from './lib/cli.js';
import { scratchDir } from './lib/processes.js';
import { markdownTable, median } from './lib/report.js';
import { startClusterUnderTest, type ClusterUnderTest } from './scenarios/e2e-cluster.js';
import { PipelineSession, type CpuPerEvent } from './scenarios/e2e-pipeline.js';

const USAGE = `usage: node dist/bench/compare-pipeline.js --before DIR --after DIR [--rate N] [--rounds N] [--duration S] [--warm-up N] [--flat-out]

Starts a local cluster (1 ingest node, 1 worker) from each build (DIR: a checkout with dist/
built) and measures them in turn: a constant offered rate of /batch/ of 1,000 events of the
realistic mix, lag capture → PROCESSED and CPU per event of each process from /proc. Prints
per-round figures and medians.

  --before DIR      the build measured as "before"
  --after DIR       the build measured as "after"
  --rate N          events/s offered in every round (default 10000)
  --rounds N        rounds (default 5)
  --duration S      seconds per measurement (default 10)
  --warm-up N       events each cluster processes before the first round (default 100000)
  --flat-out        also capture as fast as it goes with the workers running, every round:
                    events/s out of PROCESSED
  --env K=V,...     settings for both clusters (e.g. WORKER_BATCH_CONCURRENCY=2)
  --before-env K=V,...  settings for the "before" cluster only (the same build with
  --after-env K=V,...   two settings: --before . --after . --after-env WORKER_BATCH_LINGER=0)
  -h, --help        this text`;

const { values: args } = parseBenchArgs(USAGE, {
  options: {
    before: { type: 'string' },
    after: { type: 'string' },
    rate: { type: 'string', default: '10000' },
    rounds: { type: 'string', default: '5' },
    duration: { type: 'string', default: '10' },
    'warm-up': { type: 'string', default: '100000' },
    'flat-out': { type: 'boolean', default: false },
    env: { type: 'string', default: '' },
    'before-env': { type: 'string', default: '' },
    'after-env': { type: 'string', default: '' },
  },
});
if (!args.before || !args.after) usageError(USAGE, '--before and --after are required');
const rate = Number(args.rate);
const rounds = Number(args.rounds);
const durationS = Number(args.duration);
const warmUp = Number(args['warm-up']);
if (![rate, rounds, durationS].every((n) => n > 0) || !(warmUp >= 0)) usageError(USAGE, '--rate, --rounds, --duration and --warm-up must be positive numbers');
const settings = (text: string) => Object.fromEntries(text.split(',').filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
const env = { before: { ...settings(args.env), ...settings(args['before-env']) }, after: { ...settings(args.env), ...settings(args['after-env']) } };

const log = (m: string) => console.error(`[compare ${new Date().toISOString().slice(11, 19)}] ${m}`);
const dir = scratchDir('compare-pipeline');

interface Row {
  round: number;
  build: string;
  lagP50: number;
  lagP99: number;
  processedShare: number;
  cpu: CpuPerEvent;
  flatOutProcessed: number;
}

const builds: { name: string; cluster: ClusterUnderTest; session: PipelineSession }[] = [];
const rows: Row[] = [];
try {
  for (const [name, checkout] of [
    ['before', args.before],
    ['after', args.after],
  ] as const) {
    const cluster = await startClusterUnderTest({ dataDir: join(dir, name), checkout: resolve(checkout), env: env[name], log: (m) => log(`${name}: ${m}`) });
    const session = await PipelineSession.open(cluster.target, { log: (m) => log(`${name}: ${m}`) });
    builds.push({ name, cluster, session });
  }
  for (const b of builds) if (warmUp > 0) await b.session.warmUp(warmUp);
  for (let round = 1; round <= rounds; round++) {
    for (const b of round % 2 ? builds : [...builds].reverse()) {
      const p = await b.session.paced(rate, durationS);
      const flat = args['flat-out'] ? await b.session.running(durationS) : undefined;
      rows.push({ round, build: b.name, lagP50: p.p50, lagP99: p.p99, processedShare: p.processedEvents / p.sentEvents, cpu: p.cpu, flatOutProcessed: flat?.processedPerSec ?? Number.NaN });
      log(`round ${round}: ${b.name} pipeline ${p.cpu.pipeline!.toFixed(1)} µs/event, lag p99 ${p.p99} ms`);
    }
  }
} finally {
  for (const b of builds) {
    await b.session.close().catch(() => undefined);
    await b.cluster.stop().catch(() => undefined);
  }
}

const roles = ['ingest', 'nats', 'worker', 'postgres', 'pipeline', 'admin', 'load'];
const columns = ['build', ...roles.map((r) => `${r} µs/event`), 'lag p50 ms', 'lag p99 ms', 'processed ÷ sent', ...(args['flat-out'] ? ['flat out: processed events/s'] : [])];
const line = (label: string, r: Omit<Row, 'round' | 'build'>) => [label, ...roles.map((k) => r.cpu[k] ?? Number.NaN), r.lagP50, r.lagP99, r.processedShare, ...(args['flat-out'] ? [r.flatOutProcessed] : [])];
const medians = builds.map(({ name }) => {
  const mine = rows.filter((r) => r.build === name);
  const m = (pick: (r: Row) => number) => median(mine.map(pick));
  return line(name, {
    cpu: Object.fromEntries(roles.map((k) => [k, m((r) => r.cpu[k] ?? Number.NaN)])),
    lagP50: m((r) => r.lagP50),
    lagP99: m((r) => r.lagP99),
    processedShare: m((r) => r.processedShare),
    flatOutProcessed: m((r) => r.flatOutProcessed),
  });
});
console.log(
  [
    markdownTable({ title: `pipeline at ${rate.toLocaleString('en-US')} events/s offered: median of ${rounds} rounds, ${durationS}s each`, columns, rows: medians }),
    markdownTable({ title: 'Every round', columns, rows: rows.map((r) => line(`${r.round}: ${r.build}`, r)) }),
  ].join('\n\n'),
);
process.exit(0);
