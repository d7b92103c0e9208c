// `node dist/bench/idle-cluster.js --before DIR --after DIR [options]` — what a cluster costs
// while no events arrive: CPU of each process, in ms per second, of two builds side by side.
//
// A paced measurement at a few thousand events/s counts a process's idle cost in its CPU per
// event (20 ms/s is 2.5 µs per event at 8,000 events/s), and a deployment that waits for traffic
// pays it all day. Both clusters (the launcher of `npm start`: nats-server, PostgreSQL, admin, one
// ingest node, one worker) run at once, so both windows see the same host; each first processes
// a few events (shards taken over, pulls open), then nothing is sent for the measured windows.
import { join, resolve } from 'node:path';
import { parseBenchArgs, usageError } from './lib/cli.js';
import { roleCpuSeconds, scratchDir } from './lib/processes.js';
import { markdownTable, median } from './lib/report.js';
import { startClusterUnderTest, type ClusterUnderTest } from './scenarios/e2e-cluster.js';
import { PipelineSession } from './scenarios/e2e-pipeline.js';

const USAGE = `usage: node dist/bench/idle-cluster.js --before DIR --after DIR [--windows N] [--seconds S] [--settle S]

Starts a local cluster (1 ingest node, 1 worker) from each build (DIR: a checkout with dist/
built; the same DIR twice measures the noise), sends each 2,000 events, waits --settle seconds,
then reads every process's CPU from /proc over --windows windows of --seconds with no traffic.
Prints ms of CPU per second by role: median and every window.

  --before DIR   the build measured as "before"
  --after DIR    the build measured as "after"
  --windows N    measured windows (default 5)
  --seconds S    length of a window (default 20)
  --settle S     wait after the events before the first window (default 30)
  -h, --help     this text`;

const { values: args } = parseBenchArgs(USAGE, {
  options: {
    before: { type: 'string' },
    after: { type: 'string' },
    windows: { type: 'string', default: '5' },
    seconds: { type: 'string', default: '20' },
    settle: { type: 'string', default: '30' },
  },
});
if (!args.before || !args.after) usageError(USAGE, '--before and --after are required');
const windows = Number(args.windows);
const seconds = Number(args.seconds);
const settle = Number(args.settle);
if (!(Number.isInteger(windows) && windows > 0) || !(seconds > 0) || !(settle >= 0)) usageError(USAGE, '--windows must be a positive integer, --seconds positive, --settle not negative');

const log = (m: string) => console.error(`[idle ${new Date().toISOString().slice(11, 19)}] ${m}`);
const dir = scratchDir('idle-cluster');

const ROLES = ['ingest', 'nats', 'worker', 'postgres', 'admin'];
const sleep = (s: number) => new Promise((r) => setTimeout(r, s * 1000));
const builds: { name: string; cluster: ClusterUnderTest }[] = [];
const rows: { window: number; build: string; msPerSecond: Record<string, number> }[] = [];
try {
  for (const [name, checkout] of [
    ['before', args.before],
    ['after', args.after],
  ] as const) {
    const cluster = await startClusterUnderTest({ dataDir: join(dir, name), checkout: resolve(checkout), log: (m) => log(`${name}: ${m}`) });
    builds.push({ name, cluster });
    // The bench's PROCESSED reader is closed again: its consumer would be traffic of its own.
    const session = await PipelineSession.open(cluster.target, { log: (m) => log(`${name}: ${m}`) });
    await session.warmUp(2_000, 1_000);
    await session.close();
  }
  await sleep(settle);
  for (let window = 1; window <= windows; window++) {
    const start = builds.map((b) => ({ cpu: roleCpuSeconds(b.cluster.target.processes), at: performance.now() }));
    await sleep(seconds);
    builds.forEach((b, i) => {
      const cpu = roleCpuSeconds(b.cluster.target.processes);
      const elapsed = (performance.now() - start[i]!.at) / 1000;
      const msPerSecond = Object.fromEntries(ROLES.map((role) => [role, (((cpu[role] ?? 0) - (start[i]!.cpu[role] ?? 0)) * 1000) / elapsed]));
      rows.push({ window, build: b.name, msPerSecond });
    });
    log(`window ${window}: ${rows.slice(-2).map((r) => `${r.build} ${ROLES.reduce((sum, role) => sum + r.msPerSecond[role]!, 0).toFixed(1)} ms/s`).join(', ')}`);
  }
} finally {
  for (const b of builds) await b.cluster.stop().catch(() => undefined);
}

const withTotal = (ms: Record<string, number>) => [...ROLES.map((r) => ms[r]!), ROLES.reduce((sum, r) => sum + ms[r]!, 0)];
const columns = ['build', ...ROLES.map((r) => `${r} ms/s`), 'all ms/s'];
const medians = builds.map(({ name }) => {
  const mine = rows.filter((r) => r.build === name).map((r) => withTotal(r.msPerSecond));
  return [name, ...columns.slice(1).map((_, k) => median(mine.map((m) => m[k]!)))];
});
console.log(
  [
    markdownTable({ title: `Idle cluster: CPU ms per second, median of ${windows} windows of ${seconds} s`, columns, rows: medians }),
    markdownTable({ title: 'Every window', columns, rows: rows.map((r) => [`${r.window}: ${r.build}`, ...withTotal(r.msPerSecond)]) }),
  ].join('\n\n'),
);
process.exit(0);
