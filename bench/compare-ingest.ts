// `node dist/bench/compare-ingest.js --before DIR --after DIR [options]` — the ingest node of two
// builds under the same load, measured alternately in one run. On a shared host figures move 2×
// between hours and 20–30% between minutes; CPU per request from /proc moves far less, and two
// builds measured turn about (before/after, then after/before) see the same host. Both nodes
// share one nats-server; the ceiling of the scenario (trivial uWS handler, or raw JetStream
// publishing) is measured in every round too.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { spawn } from 'node:child_process';
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { generateNatsServerAuth, NatsNode } from '../deploy/local/nats-server.js';
import { freePort } from '../deploy/local/ports.js';
import { waitFor } from '../deploy/local/wait.js';
import { connectNats, NATS_USERS, PROJECTS_BUCKET, STREAMS } from '../lib/index.js';
import { measureJetStreamPublish } from './ceilings/jetstream-publish.js';
import { parseBenchArgs, usageError } from './lib/cli.js';
import { runLoad } from './lib/load.js';
import { batchBody, singleBody } from './lib/payloads.js';
import { cpuSeconds, killOnExit, startTrivialUws } from './lib/processes.js';
import { markdownTable, median } from './lib/report.js';

const USAGE = `usage: node dist/bench/compare-ingest.js --before DIR --after DIR [--scenario single|batch] [--rounds N] [--duration S]

Runs the ingest node of two builds (DIR: a checkout with dist/ built, \`npm run build\`) side by
side on one nats-server and measures them in turn under the same load, alternating which goes
first, with the scenario's ceiling in every round. Prints per-round figures and medians: requests
and events per second, CPU from /proc per request (capture single) or per event (batch 1000) of
the ingest node, nats-server and the load generator (this process, autocannon), and the ratio to
the ceiling measured in the same round. Both builds must accept NATS users (NATS_USER).

  --before DIR      the build measured as "before"
  --after DIR       the build measured as "after"
  --scenario NAME   single: /capture/, one event, 50 connections (ceiling: trivial uWS);
                    batch: /batch/ of 1,000 events, 16 connections (ceiling: raw JetStream
                    publishing of 1 MiB messages, 16 in flight) (default single)
  --rounds N        rounds (default 5)
  --duration S      seconds per measurement (default 6)
  -h, --help        this text`;

const { values: args } = parseBenchArgs(USAGE, {
  options: {
    before: { type: 'string' },
    after: { type: 'string' },
    scenario: { type: 'string', default: 'single' },
    rounds: { type: 'string', default: '5' },
    duration: { type: 'string', default: '6' },
  },
});
if (!args.before || !args.after) usageError(USAGE, '--before and --after are required');
if (args.scenario !== 'single' && args.scenario !== 'batch') usageError(USAGE, `--scenario must be single or batch (got ${JSON.stringify(args.scenario)})`);
const rounds = Number(args.rounds);
const durationS = Number(args.duration);
if (!(Number.isInteger(rounds) && rounds > 0) || !(durationS > 0)) usageError(USAGE, '--rounds and --duration must be positive numbers');

const single = args.scenario === 'single';
const KEY = 'phc_bench';
const load = single
  ? { path: '/capture/', body: singleBody(KEY), events: 1, connections: 50 }
  : { path: '/batch/', body: batchBody(KEY, 1000), events: 1000, connections: 16 };

interface Row {
  round: number;
  build: string;
  reqPerSec: number;
  eventsPerSec: number;
  /** CPU µs per request (single) or per event (batch) of each process. */
  serverUs: number;
  natsUs: number;
  loadUs: number;
  p99: number;
}

const ownCpu = () => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
};

const dir = mkdtempSync(join(tmpdir(), 'spate-compare-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
const auth = generateNatsServerAuth();
const operator = { user: NATS_USERS.operator, pass: auth.passwords.operator };
const nats = new NatsNode({ dir: join(dir, 'nats'), port: await freePort(), monitorPort: await freePort(), serverName: 'compare', auth });
await nats.start();
const nc = await connectNats(nats.url, 'bench-compare', operator);
await (await new Kvm(nc).create(PROJECTS_BUCKET, { history: 1 })).put(KEY, JSON.stringify({ projectId: 1, organizationId: 'bench' }));
const jsm = await jetstreamManager(nc);

const builds = await Promise.all(
  (
    [
      ['before', args.before],
      ['after', args.after],
    ] as const
  ).map(async ([name, checkout]) => {
    const port = await freePort();
    const child = spawn(process.execPath, [join(resolve(checkout), 'dist/ingest/main.js')], {
      env: { ...process.env, NATS_URL: nats.url, NATS_USER: NATS_USERS.ingest, NATS_PASSWORD: auth.passwords.ingest, CAPTURE_PORT: String(port), LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    killOnExit(child);
    const url = `http://127.0.0.1:${port}`;
    await waitFor(`the ${name} ingest node`, async () => (await fetch(`${url}/_ready`).catch(() => undefined))?.ok === true, 60_000);
    return { name, url, pid: child.pid!, child };
  }),
);
const trivial = single ? await startTrivialUws() : undefined;

/** Until nats-server and both nodes use under a fifth of a core (leftovers of the last measurement). */
async function quiet(): Promise<void> {
  const busy = () => cpuSeconds(nats.pid, ...builds.map((b) => b.pid));
  for (let i = 0, before = busy(); i < 50; i++) {
    await new Promise((r) => setTimeout(r, 200));
    const now = busy();
    if (now - before < 0.04) return;
    before = now;
  }
}

async function measure(build: string, url: string, pid: number, round: number): Promise<Row> {
  for (const name of Object.values(STREAMS)) await jsm.streams.purge(name);
  await quiet();
  const at = { server: cpuSeconds(pid), nats: cpuSeconds(nats.pid), load: ownCpu() };
  const r = await runLoad({ url: `${url}${load.path}`, body: load.body, eventsPerRequest: load.events, connections: load.connections, durationS });
  // Per request for single events, per event for batches: the units of the targets.
  const units = single ? r.requests : r.ok * load.events;
  const per = (seconds: number) => (units > 0 ? (seconds / units) * 1e6 : Number.NaN);
  return {
    round,
    build,
    reqPerSec: r.reqPerSec,
    eventsPerSec: r.eventsPerSec,
    serverUs: per(cpuSeconds(pid) - at.server),
    natsUs: per(cpuSeconds(nats.pid) - at.nats),
    loadUs: per(ownCpu() - at.load),
    p99: r.p99,
  };
}

const rows: Row[] = [];
try {
  for (const b of builds) await runLoad({ url: `${b.url}${load.path}`, body: load.body, eventsPerRequest: load.events, connections: load.connections, durationS: 2 });
  for (let round = 1; round <= rounds; round++) {
    for (const b of round % 2 ? builds : [...builds].reverse()) {
      rows.push(await measure(b.name, b.url, b.pid, round));
      console.error(`round ${round}: ${b.name} ${Math.round(rows.at(-1)!.eventsPerSec)} events/s`);
    }
    if (trivial) {
      rows.push(await measure('trivial uWS', trivial.url, trivial.pid, round));
    } else {
      await quiet();
      const natsBefore = cpuSeconds(nats.pid);
      const broker = await measureJetStreamPublish(nats.url, operator, { durationS, messageBytes: 1024 * 1024, inFlight: 16 });
      rows.push({
        round,
        build: 'raw JetStream publish',
        reqPerSec: Number.NaN,
        eventsPerSec: broker.eventsPerSec,
        serverUs: ((cpuSeconds(nats.pid) - natsBefore) / broker.events) * 1e6,
        natsUs: Number.NaN,
        loadUs: (broker.clientCpuSeconds / broker.events) * 1e6,
        p99: Number.NaN,
      });
    }
  }
} finally {
  for (const b of builds) b.child.kill('SIGTERM');
  await trivial?.stop();
  await nc.close();
  await nats.stop();
}

const ceilingName = single ? 'trivial uWS' : 'raw JetStream publish';
const ceilingOf = (round: number) => rows.find((r) => r.round === round && r.build === ceilingName)!;
const ratio = (r: Row) => (single ? r.reqPerSec / ceilingOf(r.round).reqPerSec : r.eventsPerSec / ceilingOf(r.round).eventsPerSec);
const unit = single ? 'request' : 'event';
const columns = ['build', 'req/s', 'events/s', `server CPU µs/${unit}`, `NATS CPU µs/${unit}`, `load generator CPU µs/${unit}`, 'p99 ms', `÷ ${ceilingName}`];
const line = (r: Row, round?: number): (string | number)[] => [
  round === undefined ? r.build : `${round}: ${r.build}`,
  r.reqPerSec,
  r.eventsPerSec,
  r.serverUs,
  r.natsUs,
  r.loadUs,
  r.p99,
  r.build === ceilingName ? '–' : ratio(r),
];
const medians = [...new Set(rows.map((r) => r.build))].map((build) => {
  const mine = rows.filter((r) => r.build === build);
  const m = (pick: (r: Row) => number) => median(mine.map(pick));
  return [build, m((r) => r.reqPerSec), m((r) => r.eventsPerSec), m((r) => r.serverUs), m((r) => r.natsUs), m((r) => r.loadUs), m((r) => r.p99), build === ceilingName ? '–' : m(ratio)];
});
console.log(
  [
    markdownTable({ title: `${single ? 'capture single (50 connections)' : 'batch 1000 (16 connections)'}: median of ${rounds} rounds, ${durationS}s each`, columns, rows: medians }),
    markdownTable({ title: 'Every round', columns, rows: rows.map((r) => line(r, r.round)) }),
  ].join('\n\n'),
);
process.exit(0);
