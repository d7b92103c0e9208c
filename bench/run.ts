// `npm run bench [-- --quick] [--runs N] [--duration S] [--only NAME]`
// Capture throughput of one ingest node against the ceilings measured in the same run: a
// trivial uWS handler (HTTP floor) and raw batched JetStream publishing (broker floor).
// Results (medians of the runs) go to bench/results/<date>.md and .json.
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { connectNats, PROJECTS_BUCKET, STREAMS } from '../lib/index.js';
import { NatsNode } from '../deploy/local/nats-server.js';
import { freePort } from '../deploy/local/ports.js';
import { waitFor } from '../deploy/local/wait.js';
import { measureJetStreamPublish, type PublishCeiling } from './ceilings/jetstream-publish.js';
import { runLoad, type LoadResult } from './lib/load.js';
import { batchBody, batchOfSize, singleBody } from './lib/payloads.js';
import { cpuSeconds, sampleRss, startNodeProcess, startTrivialUws } from './lib/processes.js';
import { machineInfo, markdownTable, median, writeResults, type Table } from './lib/report.js';

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    runs: { type: 'string' },
    duration: { type: 'string' },
    only: { type: 'string' },
    out: { type: 'string', default: new URL('../../bench/results', import.meta.url).pathname },
  },
});
const runs = Number(args.runs ?? (args.quick ? 1 : 3));
const durationS = Number(args.duration ?? (args.quick ? 3 : 10));
const KEY = 'phc_bench';
const MB20 = 20 * 1024 * 1024;

interface Scenario {
  name: string;
  path: string;
  body: string;
  events: number;
  connections: number;
  /** Compare with the trivial uWS handler answering the same requests. */
  httpCeiling?: boolean;
  /** Compare with raw JetStream publishing of the same bytes. */
  brokerCeiling?: boolean;
  trackRss?: boolean;
}

interface Measured extends LoadResult {
  ingestCpuUsPerEvent: number;
  rssPeakMiB: number;
}

const log = (m: string) => console.error(`[bench] ${m}`);

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'spate-bench-'));
  const nats = new NatsNode({ dir, port: await freePort(), monitorPort: await freePort(), serverName: 'bench' });
  await nats.start();
  const nc = await connectNats(nats.url, 'bench');
  const kv = await new Kvm(nc).create(PROJECTS_BUCKET, { history: 1 });
  await kv.put(KEY, JSON.stringify({ projectId: 1, organizationId: 'bench' }));
  const jsm = await jetstreamManager(nc);

  const capturePort = await freePort();
  const ingest = startNodeProcess(import.meta.url, '../ingest/main', { NATS_URL: nats.url, CAPTURE_PORT: String(capturePort), LOG_LEVEL: 'warn' });
  const captureUrl = `http://127.0.0.1:${capturePort}`;
  await waitFor('ingest node', async () => (await fetch(`${captureUrl}/_ready`).catch(() => undefined))?.ok === true, 60_000);
  const trivial = await startTrivialUws();

  const big = batchOfSize(KEY, MB20);
  const scenarios: Scenario[] = [
    { name: 'capture single', path: '/capture/', body: singleBody(KEY), events: 1, connections: 100, httpCeiling: true },
    { name: 'batch 100', path: '/batch/', body: batchBody(KEY, 100), events: 100, connections: 32, httpCeiling: true },
    { name: 'batch 1000', path: '/batch/', body: batchBody(KEY, 1000), events: 1000, connections: 16, httpCeiling: true, brokerCeiling: true },
    { name: 'batch 20 MB', path: '/batch/', body: big.body, events: big.events, connections: 16, brokerCeiling: true, trackRss: true },
  ].filter((s) => !args.only || s.name.includes(args.only));

  const spate = new Map<string, Measured[]>();
  const http = new Map<string, LoadResult[]>();
  const broker: PublishCeiling[] = [];
  const purge = async () => {
    for (const name of Object.values(STREAMS)) await jsm.streams.purge(name);
  };

  for (let run = 1; run <= runs; run++) {
    for (const s of scenarios) {
      await purge();
      log(`run ${run}/${runs}: ${s.name} (${s.connections} connections, ${durationS}s)`);
      const cpuBefore = cpuSeconds(ingest.pid);
      const rss = s.trackRss ? sampleRss(ingest.pid) : undefined;
      const r = await runLoad({ url: `${captureUrl}${s.path}`, body: s.body, eventsPerRequest: s.events, connections: s.connections, durationS });
      const rssPeak = rss?.stop() ?? Number.NaN;
      const cpu = cpuSeconds(ingest.pid) - cpuBefore;
      const events = r.eventsPerSec * durationS;
      spate.set(s.name, [...(spate.get(s.name) ?? []), { ...r, ingestCpuUsPerEvent: events > 0 ? (cpu / events) * 1e6 : Number.NaN, rssPeakMiB: rssPeak / 1024 ** 2 }]);
      if (s.httpCeiling) {
        log(`run ${run}/${runs}: ${s.name} → trivial uWS`);
        const t = await runLoad({ url: `${trivial.url}${s.path}`, body: s.body, eventsPerRequest: s.events, connections: s.connections, durationS });
        http.set(s.name, [...(http.get(s.name) ?? []), t]);
      }
    }
    if (scenarios.some((s) => s.brokerCeiling)) {
      await purge();
      log(`run ${run}/${runs}: raw JetStream publish ceiling`);
      broker.push(await measureJetStreamPublish(nats.url, { durationS, messageBytes: 1024 * 1024, inFlight: 16 }));
    }
  }

  await trivial.stop();
  await ingest.stop();
  await nc.close();
  await nats.stop();
  rmSync(dir, { recursive: true, force: true });

  const med = <T>(list: T[] | undefined, pick: (x: T) => number) => median((list ?? []).map(pick));
  const brokerEvents = median(broker.map((b) => b.eventsPerSec));
  const brokerMb = median(broker.map((b) => b.mbPerSec));
  const table: Table = {
    title: `Capture into JetStream (median of ${runs} run${runs > 1 ? 's' : ''}, ${durationS}s each)`,
    note: 'Every counted event was acknowledged by JetStream before its request got 200. "× uWS" compares requests/s with a trivial uWS handler given the same requests; "× JetStream" compares events/s with raw batched publishing of the same bytes.',
    columns: ['scenario', 'conns', 'req/s', 'events/s', 'MB/s in', 'p50 ms', 'p99 ms', 'ingest CPU µs/event', 'peak RSS MiB', 'trivial uWS req/s', '× uWS', '× JetStream', 'errors'],
    rows: scenarios.map((s) => {
      const m = spate.get(s.name);
      const t = http.get(s.name);
      const reqPerSec = med(m, (x) => x.reqPerSec);
      const eventsPerSec = med(m, (x) => x.eventsPerSec);
      const trivialReq = med(t, (x) => x.reqPerSec);
      return [
        s.name,
        s.connections,
        reqPerSec,
        eventsPerSec,
        med(m, (x) => x.mbPerSec),
        med(m, (x) => x.p50),
        med(m, (x) => x.p99),
        med(m, (x) => x.ingestCpuUsPerEvent),
        med(m, (x) => x.rssPeakMiB),
        s.httpCeiling ? trivialReq : '–',
        s.httpCeiling ? `${(reqPerSec / trivialReq).toFixed(2)}` : '–',
        s.brokerCeiling ? `${(eventsPerSec / brokerEvents).toFixed(2)}` : '–',
        (m ?? []).reduce((n, x) => n + x.errors + x.non2xx, 0),
      ];
    }),
  };
  const ceilings: Table = {
    title: 'Ceilings measured in the same run',
    columns: ['ceiling', 'events/s', 'MB/s'],
    rows: [['raw JetStream publish, 1 MiB messages, 16 in flight', brokerEvents, brokerMb]],
  };
  const name = new Date().toISOString().slice(0, 10) + (args.quick ? '-quick' : '');
  const files = writeResults(args.out, name, machineInfo(), [table, ceilings], { spate: Object.fromEntries(spate), http: Object.fromEntries(http), broker });
  console.log(`\n${markdownTable(table)}\n\n${markdownTable(ceilings)}\n\nwritten: ${files.md}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
