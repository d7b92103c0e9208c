// `npx tsx bench/streams/write-rate.ts` — how fast a 3-node JetStream cluster (streams at R3) stores
// captured events with EVENTS as one stream and as K partition streams (STREAM_PARTITIONS), side by
// side in one run: the same servers, the same load, K values alternating from run to run so that a
// host that speeds up or slows down over the run weighs on both alike.
//
// The load is what ingest nodes send: one connection per NATS node (as ingest nodes spread over the
// servers), each keeping IN_FLIGHT JetStream publishes outstanding, NDJSON messages of
// --events-per-message ~400-byte events with a unique Nats-Msg-Id, on events.<project>.<shard>
// round-robin over the 16 shards. It reports acknowledged messages and events per second, and the
// CPU each nats-server used (a stream's leader does most of a write's work: with one stream, one
// node does it all). The load generator shares the machine's cores with the three servers.
import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import { headers } from '@nats-io/transport-node';
import {
  connectNats,
  createLogger,
  ensureStreams,
  NATS_USERS,
  spreadStreamLeaders,
  STREAMS,
  streamLayout,
  streamNamesOf,
  type NatsConnection,
} from '../../lib/index.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateNatsServerAuth, startNatsNodes, type NatsNode } from '../../deploy/local/nats-server.js';
import { parseBenchArgs, usageError } from '../lib/cli.js';
import { cpuSeconds } from '../lib/processes.js';
import { median, writeResults, type Table } from '../lib/report.js';
import { runInfo } from '../lib/run-info.js';

const USAGE = `usage: npx tsx bench/streams/write-rate.ts [--partitions 1,3] [--events-per-message 1,50] [--runs N] [--duration S] [--in-flight N] [--out DIR]

Starts a 3-node nats-server cluster on loopback and measures, with EVENTS at R3 as one stream and
as K partition streams (leaders spread over the nodes), how many messages and events per second the
cluster acknowledges, and each server's CPU. Writes bench/results/<date>-streams.md and .json.

  --partitions LIST          STREAM_PARTITIONS values to compare (default 1,3)
  --events-per-message LIST  events per message (default 1,50: single captures, SDK batches)
  --runs N                   runs of each combination, reported as medians (default 3)
  --duration S               seconds measured per run, after 1 s of warm-up (default 10)
  --in-flight N              publishes outstanding per connection (default 256)
  --out DIR                  where the report goes (default bench/results)
  -h, --help                 this text`;

const { values: args } = parseBenchArgs(USAGE, {
  options: {
    partitions: { type: 'string', default: '1,3' },
    'events-per-message': { type: 'string', default: '1,50' },
    runs: { type: 'string', default: '3' },
    duration: { type: 'string', default: '10' },
    'in-flight': { type: 'string', default: '256' },
    // bench/results of the repository, from bench/streams/ or dist/bench/streams/.
    out: { type: 'string', default: new URL(import.meta.url.includes('/dist/bench/') ? '../../../bench/results' : '../../bench/results', import.meta.url).pathname },
  },
});

function integers(option: string, text: string): number[] {
  const list = text.split(',').map(Number);
  if (list.length === 0 || list.some((n) => !Number.isInteger(n) || n < 1)) usageError(USAGE, `--${option} must be positive integers, comma-separated (got ${JSON.stringify(text)})`);
  return list;
}

const partitionsList = integers('partitions', args.partitions);
const eventsPerMessageList = integers('events-per-message', args['events-per-message']);
const runs = integers('runs', args.runs)[0]!;
const durationS = Number(args.duration);
if (!(durationS > 0)) usageError(USAGE, '--duration must be a positive number');
const inFlight = integers('in-flight', args['in-flight'])[0]!;
const SHARDS = 16;
const log = (m: string) => console.error(`[streams bench] ${m}`);
const silent = createLogger('streams-bench', 'silent');

/** A realistic captured event line (~400 bytes). */
function eventLine(i: number): string {
  return JSON.stringify({
    uuid: `0190a0b4-7e3f-7c1a-8b2d-${String(i).padStart(12, '0')}`,
    event: '$pageview',
    distinct_id: `user-${i % 5000}`,
    properties: { $current_url: 'https://example.com/pricing', $browser: 'Chrome', $os: 'Mac OS X', $lib: 'web', $lib_version: '1.130.0', plan: 'pro' },
    timestamp: '2026-11-27T10:00:00.000Z',
    now: '2026-11-27T10:00:00.000Z',
    ip: '203.0.113.7',
    token: 'phc_bench',
    project_id: 1,
  });
}

/** Deletes every capture stream (any layout), so the next layout can take the subjects. */
async function deleteCaptureStreams(jsm: JetStreamManager): Promise<void> {
  const ours = new RegExp(`^(${Object.values(STREAMS).join('|')})(_\\d+)?$`);
  const names: string[] = [];
  for await (const name of jsm.streams.names()) if (ours.test(name)) names.push(name);
  for (const name of names) await jsm.streams.delete(name);
}

interface Measured {
  partitions: number;
  eventsPerMessage: number;
  run: number;
  messagesPerS: number;
  eventsPerS: number;
  mbPerS: number;
  /** Cores each nats-server used, by node name. */
  serverCores: Record<string, number>;
  clientCores: number;
  /** Leader of each EVENTS stream. */
  leaders: Record<string, string | undefined>;
  errors: number;
}

async function measure(cluster: { nodes: NatsNode[] }, publishers: JetStreamClient[], jsm: JetStreamManager, admin: NatsConnection, partitions: number, eventsPerMessage: number, run: number): Promise<Measured> {
  await deleteCaptureStreams(jsm);
  const layout = streamLayout(SHARDS, partitions);
  await ensureStreams(jsm, { replicas: 3, duplicateWindowMs: 120_000, maxAgeMs: 0, maxBytes: -1 }, layout);
  await spreadStreamLeaders(admin, jsm, layout, silent);
  const leaders = Object.fromEntries(await Promise.all(streamNamesOf('events', layout).map(async (name) => [name, (await jsm.streams.info(name)).cluster?.leader] as const)));

  const payload = new TextEncoder().encode(Array.from({ length: eventsPerMessage }, (_, i) => eventLine(i)).join('\n') + '\n');
  let counting = false;
  let stop = false;
  let acked = 0;
  let errors = 0;
  let sequence = 0;
  const loops = publishers.flatMap((js, c) =>
    Array.from({ length: inFlight }, async () => {
      while (!stop) {
        const n = ++sequence;
        const h = headers();
        h.set('Spate-Events', String(eventsPerMessage));
        try {
          await js.publish(`events.1.${n % SHARDS}`, payload, { msgID: `bench-${run}-${partitions}-${eventsPerMessage}-${c}-${n}`, headers: h });
          if (counting) acked++;
        } catch {
          if (counting) errors++;
        }
      }
    }),
  );
  await new Promise((r) => setTimeout(r, 1_000));
  const pids = cluster.nodes.map((n) => n.pid);
  const serverBefore = pids.map((pid) => cpuSeconds(pid));
  const clientBefore = process.cpuUsage();
  const started = performance.now();
  counting = true;
  await new Promise((r) => setTimeout(r, durationS * 1_000));
  counting = false;
  const seconds = (performance.now() - started) / 1000;
  const serverCores = Object.fromEntries(cluster.nodes.map((n, i) => [n.options.serverName, (cpuSeconds(pids[i]) - serverBefore[i]!) / seconds]));
  const client = process.cpuUsage(clientBefore);
  stop = true;
  await Promise.all(loops);
  const messagesPerS = acked / seconds;
  return {
    partitions,
    eventsPerMessage,
    run,
    messagesPerS,
    eventsPerS: messagesPerS * eventsPerMessage,
    mbPerS: (messagesPerS * payload.length) / 1e6,
    serverCores,
    clientCores: (client.user + client.system) / 1e6 / seconds,
    leaders,
    errors,
  };
}

const started = performance.now();
const info = runInfo();
log(`3-node cluster, R3; partitions ${partitionsList.join(', ')}; events per message ${eventsPerMessageList.join(', ')}; ${runs} runs of ${durationS} s`);
// The servers as the launcher runs them (deploy/local), in a temp dir; the bench connects as the operator.
const clusterDir = mkdtempSync(join(tmpdir(), 'spate-streams-bench-'));
const auth = generateNatsServerAuth();
const cluster = { nodes: await startNatsNodes(clusterDir, 3, auth, { clusterName: 'spate-bench' }) };
const operator = { user: NATS_USERS.operator, pass: auth.passwords.operator };
const nodeUrls = cluster.nodes.map((n) => n.url);
const connections = await Promise.all(nodeUrls.map((url, i) => connectNats(url, `streams-bench-${i + 1}`, operator, { asyncTraces: false })));
const admin = await connectNats(nodeUrls.join(','), 'streams-bench-admin', operator);
const jsm = await jetstreamManager(admin);
const publishers = connections.map((nc) => jetstream(nc, { timeout: 10_000 }));
const results: Measured[] = [];
try {
  for (let run = 1; run <= runs; run++) {
    // Alternate the order: what the host does over time weighs on every value alike.
    const order = run % 2 === 1 ? partitionsList : [...partitionsList].reverse();
    for (const eventsPerMessage of eventsPerMessageList) {
      for (const partitions of order) {
        const m = await measure(cluster, publishers, jsm, admin, partitions, eventsPerMessage, run);
        results.push(m);
        const cores = Object.entries(m.serverCores).map(([n, c]) => `${n} ${c.toFixed(2)}`).join(', ');
        log(`run ${run}, K=${partitions}, ${eventsPerMessage} ev/msg: ${Math.round(m.messagesPerS)} msg/s, ${Math.round(m.eventsPerS)} ev/s; cores ${cores}, client ${m.clientCores.toFixed(2)}; leaders ${Object.values(m.leaders).join(' ')}`);
      }
    }
  }
} finally {
  for (const nc of connections) await nc.close();
  await admin.close();
  await Promise.all(cluster.nodes.map((n) => n.stop()));
  rmSync(clusterDir, { recursive: true, force: true });
}

const nodes = cluster.nodes.map((n) => n.options.serverName);
/** Server CPU per acknowledged message, µs, of each node, busiest first (which node leads changes from run to run). */
const microsPerMessage = (r: Measured) => nodes.map((n) => ((r.serverCores[n] ?? Number.NaN) / r.messagesPerS) * 1e6).sort((a, b) => b - a);
const rows: (string | number)[][] = [];
for (const eventsPerMessage of eventsPerMessageList) {
  const base = results.filter((r) => r.eventsPerMessage === eventsPerMessage && r.partitions === partitionsList[0]);
  for (const partitions of partitionsList) {
    const of = results.filter((r) => r.eventsPerMessage === eventsPerMessage && r.partitions === partitions);
    // Same-run ratio against the first K: each pair measured within a minute of each other.
    const ratios = of.map((r) => r.messagesPerS / (base.find((b) => b.run === r.run)?.messagesPerS ?? Number.NaN));
    const busiest = of.map((r) => microsPerMessage(r)[0]!);
    const total = of.map((r) => microsPerMessage(r).reduce((a, b) => a + b, 0));
    rows.push([
      partitions,
      eventsPerMessage,
      median(of.map((r) => r.messagesPerS)),
      median(of.map((r) => r.eventsPerS)),
      median(of.map((r) => r.mbPerS)),
      `×${median(ratios).toFixed(2)} (${ratios.map((x) => x.toFixed(2)).join(', ')})`,
      nodes.map((_, i) => median(of.map((r) => microsPerMessage(r)[i]!)).toFixed(1)).join(' / '),
      `${Math.round((100 * median(busiest)) / median(total))} %`,
      1e6 / median(busiest),
      median(of.map((r) => r.clientCores)),
      of.reduce((a, r) => a + r.errors, 0),
    ]);
  }
}
const table: Table = {
  title: 'JetStream write rate: EVENTS as one stream and as K partitions (3 nodes, R3)',
  note:
    `Medians of ${runs} runs of ${durationS} s; 3 connections (one per node) × ${inFlight} publishes in flight; ~400-byte events. ` +
    `Same-run ratio: msgs/s against K = ${partitionsList[0]} measured minutes apart in the same run (each run's in brackets). ` +
    'Server µs/msg: CPU each nats-server spent per acknowledged message, busiest node first; busiest share: the busiest node\'s part of all three. ' +
    'At a core per node: the rate at which the busiest node would use one whole core (1 s / its µs per message), a projection for hosts that do not share cores; here the three servers and the load generator share 2 cores with other work.',
  columns: ['K', 'events/msg', 'msgs/s', 'events/s', 'MB/s', 'same-run ratio', 'server µs/msg (busiest first)', 'busiest share', 'msgs/s at a core per node', 'client cores', 'errors'],
  rows,
};
const date = info.date.slice(0, 10);
const written = writeResults(args.out, `${date}-streams`, { info, elapsedS: (performance.now() - started) / 1000, tables: [table], data: results });
console.log(`\n${rows.map((r) => r.join('\t')).join('\n')}\n\nwritten: ${written.md}`);
