// `npm run bench [-- --quick] [--runs N] [--duration S] [--only NAME]`
// Capture throughput of one ingest node against, in the same run: the ceilings (a trivial uWS
// handler: HTTP floor; raw batched JetStream publishing: broker floor) and the baseline (the
// straightforward node:http + publish-per-event server in bench/baseline, not part of the
// product). Also the historical import (`spate import`), latency at 25/50/75% of the measured
// maximum, worker throughput (bench/workers, when present) and end-to-end capture → processed
// lag (when workers exist). Medians of the runs go to bench/results/<date>.md, .json and SVG charts.
import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { connectNats, PROJECTS_BUCKET, STREAMS } from '../lib/index.js';
import { NatsNode } from '../deploy/local/nats-server.js';
import { freePort } from '../deploy/local/ports.js';
import { waitFor } from '../deploy/local/wait.js';
import { measureJetStreamPublish, type PublishCeiling } from './ceilings/jetstream-publish.js';
import { latencyChart, throughputChart, type LatencyPoint, type ThroughputBar } from './lib/charts.js';
import { writeEventsFile } from './lib/generate-events.js';
import { runLoad, type LoadResult } from './lib/load.js';
import { batchBody, batchOfSize, singleBody } from './lib/payloads.js';
import { cpuSeconds, sampleRss, startBaseline, startNodeProcess, startTrivialUws } from './lib/processes.js';
import { machineInfo, markdownTable, median, writeResults, type Table } from './lib/report.js';
import { runEndToEnd } from './scenarios/e2e-cluster.js';
import { workersAvailable, type LagPoint } from './scenarios/e2e-lag.js';
import { measureImport, type ImportMeasurement } from './scenarios/historical-import.js';
import { latencyVsRate, type RatePoint } from './scenarios/latency-vs-rate.js';
import { runWorkerBench } from './scenarios/worker-throughput.js';

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    runs: { type: 'string' },
    duration: { type: 'string' },
    only: { type: 'string' },
    out: { type: 'string', default: new URL('../../bench/results', import.meta.url).pathname },
  },
});
const quick = args.quick;
const runs = Number(args.runs ?? (quick ? 1 : 3));
const baseDurationS = Number(args.duration ?? (quick ? 2 : 10));
const durationS = baseDurationS;
const KEY = 'phc_bench';
const MB20 = 20 * 1024 * 1024;
const FRACTIONS = [0.25, 0.5, 0.75] as const;
const SPATE = 'Spate';
const BASELINE = 'baseline (node:http, publish per event)';
const HTTP_CEILING = 'trivial uWS (HTTP ceiling)';
const BROKER_CEILING = 'raw JetStream publish (broker ceiling)';

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
  /** Also measure latency at fractions of this scenario's maximum. */
  latency?: boolean;
  /** Seconds at least (a 20 MB request takes seconds; a 2 s quick run would finish none). */
  minDurationS?: number;
}

interface Measured extends LoadResult {
  ingestCpuUsPerEvent: number;
  rssPeakMiB: number;
}

const benchStarted = performance.now();
const log = (m: string) => console.error(`[bench +${((performance.now() - benchStarted) / 1000).toFixed(0)}s] ${m}`);
const wanted = (name: string) => !args.only || name.includes(args.only);
const push = <K, V>(map: Map<K, V[]>, key: K, value: V) => map.set(key, [...(map.get(key) ?? []), value]);
const ratio = (a: number, b: number) => (b > 0 && Number.isFinite(a) ? `${a / b >= 10 ? (a / b).toFixed(0) : (a / b).toPrecision(2)}×` : b === 0 && a > 0 ? '∞ (baseline finished nothing)' : '–');

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
  const baseline = await startBaseline(nats.url); // after the ingest node created the streams

  const big = batchOfSize(KEY, MB20);
  const scenarios: Scenario[] = [
    { name: 'capture single', path: '/capture/', body: singleBody(KEY), events: 1, connections: 100, httpCeiling: true, latency: true },
    { name: 'batch 100', path: '/batch/', body: batchBody(KEY, 100), events: 100, connections: 32, httpCeiling: true, latency: !quick },
    { name: 'batch 1000', path: '/batch/', body: batchBody(KEY, 1000), events: 1000, connections: 16, httpCeiling: true, brokerCeiling: true },
    { name: 'batch 20 MB', path: '/batch/', body: big.body, events: big.events, connections: 16, brokerCeiling: true, trackRss: true, minDurationS: 5 },
  ].filter((s) => wanted(s.name));
  const doImport = wanted('historical import');

  // The file for the import scenario: more events than the importer can send in durationS.
  const importFile = join(dir, 'import.ndjson');
  const importEvents = quick ? 500_000 : 2_000_000;
  // Long enough for the sustained rate to show after a 1 s warm-up (--quick keeps under a minute).
  const importDurationS = quick ? 4 : Math.max(5, durationS);
  if (doImport) {
    log(`writing ${importEvents.toLocaleString('en-US')} events for the import scenario`);
    await writeEventsFile(importFile, { count: importEvents });
  }

  const spate = new Map<string, Measured[]>();
  const base = new Map<string, LoadResult[]>();
  const http = new Map<string, LoadResult[]>();
  const broker: PublishCeiling[] = [];
  const imports = new Map<string, ImportMeasurement[]>();
  const purge = async () => {
    for (const name of Object.values(STREAMS)) await jsm.streams.purge(name);
  };

  for (let run = 1; run <= runs; run++) {
    for (const s of scenarios) {
      await purge();
      const durationS = Math.max(s.minDurationS ?? 0, baseDurationS);
      log(`run ${run}/${runs}: ${s.name} (${s.connections} connections, ${durationS}s)`);
      const cpuBefore = cpuSeconds(ingest.pid);
      const rss = s.trackRss ? sampleRss(ingest.pid) : undefined;
      const r = await runLoad({ url: `${captureUrl}${s.path}`, body: s.body, eventsPerRequest: s.events, connections: s.connections, durationS });
      const rssPeak = rss?.stop() ?? Number.NaN;
      const cpu = cpuSeconds(ingest.pid) - cpuBefore;
      const events = r.eventsPerSec * durationS;
      push(spate, s.name, { ...r, ingestCpuUsPerEvent: events > 0 ? (cpu / events) * 1e6 : Number.NaN, rssPeakMiB: rssPeak / 1024 ** 2 });
      if (s.httpCeiling) {
        log(`run ${run}/${runs}: ${s.name} → trivial uWS`);
        push(http, s.name, await runLoad({ url: `${trivial.url}${s.path}`, body: s.body, eventsPerRequest: s.events, connections: s.connections, durationS }));
      }
      await purge();
      log(`run ${run}/${runs}: ${s.name} → baseline`);
      // The baseline gets the base duration even where Spate gets longer: it finishes no 20 MB request in either.
      push(base, s.name, await runLoad({ url: `${baseline.url}${s.path}`, body: s.body, eventsPerRequest: s.events, connections: s.connections, durationS: baseDurationS }));
    }
    if (scenarios.some((s) => s.brokerCeiling)) {
      await purge();
      log(`run ${run}/${runs}: raw JetStream publish ceiling`);
      broker.push(await measureJetStreamPublish(nats.url, { durationS, messageBytes: 1024 * 1024, inFlight: 16 }));
    }
    if (doImport) {
      for (const [series, url] of [
        [SPATE, captureUrl],
        [BASELINE, baseline.url],
      ] as const) {
        await purge();
        log(`run ${run}/${runs}: historical import → ${series === SPATE ? 'Spate' : 'baseline'}`);
        push(imports, series, await measureImport({ captureUrl: url, key: KEY, file: importFile, durationS: importDurationS, warmupS: 1, workDir: dir }));
      }
    }
  }

  // Latency at 25/50/75% of each scenario's median maximum (requests/s).
  const latency = new Map<string, RatePoint[]>();
  for (const s of scenarios.filter((x) => x.latency)) {
    await purge();
    const max = median((spate.get(s.name) ?? []).map((m) => m.reqPerSec));
    if (!(max > 0)) continue;
    latency.set(s.name, await latencyVsRate({ url: captureUrl, path: s.path, body: s.body, eventsPerRequest: s.events, connections: s.connections, durationS, maxReqPerSec: max, fractions: FRACTIONS, log }));
  }

  await purge();
  const workers = await runWorkerBench(import.meta.url, { natsUrl: nats.url, quick, durationS, runs, log });

  await baseline.stop();
  await trivial.stop();
  await ingest.stop();
  await nc.close();
  await nats.stop();

  // End to end needs workers: a whole local cluster (the launcher) with them.
  let lag: LagPoint[] | undefined;
  let lagNote = '';
  if (!wanted('e2e lag')) lagNote = 'not run (--only)';
  else if (!workersAvailable()) lagNote = 'not run: no worker entry point (workers/main.ts) in this checkout';
  else lag = await runEndToEnd({ dataDir: join(dir, 'cluster'), durationS, fractions: FRACTIONS, log });
  rmSync(dir, { recursive: true, force: true });

  // ---- report ----
  const med = <T>(list: T[] | undefined, pick: (x: T) => number) => median((list ?? []).map(pick));
  const brokerEvents = median(broker.map((b) => b.eventsPerSec));
  const brokerMb = median(broker.map((b) => b.mbPerSec));
  const plural = runs > 1 ? 's' : '';
  const capture: Table = {
    title: `Capture into JetStream (median of ${runs} run${plural}, ${durationS}s each)`,
    note:
      'Every counted event was acknowledged by JetStream before its request got 200. "× baseline" compares events/s with the baseline server (node:http, JSON.parse, one awaited JetStream publish per event; bench/baseline) given the same requests; ' +
      '"× uWS" compares requests/s with a trivial uWS handler; "× JetStream" compares events/s with raw batched publishing of the same bytes.',
    columns: ['scenario', 'conns', 'req/s', 'events/s', 'MB/s in', 'p50 ms', 'p99 ms', 'ingest CPU µs/event', 'peak RSS MiB', 'baseline events/s', 'baseline p99 ms', '× baseline', '× uWS', '× JetStream', 'errors'],
    rows: scenarios.map((s) => {
      const m = spate.get(s.name);
      const b = base.get(s.name);
      const reqPerSec = med(m, (x) => x.reqPerSec);
      const eventsPerSec = med(m, (x) => x.eventsPerSec);
      const baseEvents = med(b, (x) => x.eventsPerSec);
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
        baseEvents,
        baseEvents > 0 ? med(b, (x) => x.p99) : '–',
        ratio(eventsPerSec, baseEvents),
        s.httpCeiling ? ratio(reqPerSec, med(http.get(s.name), (x) => x.reqPerSec)) : '–',
        s.brokerCeiling ? ratio(eventsPerSec, brokerEvents) : '–',
        (m ?? []).reduce((n, x) => n + x.errors + x.non2xx, 0),
      ];
    }),
  };
  const spateImport = imports.get(SPATE);
  const baseImport = imports.get(BASELINE);
  const importEventsPerSec = med(spateImport, (x) => x.eventsPerSec);
  const importTable: Table = {
    title: `Historical import: \`spate import\` into HISTORICAL (median of ${runs} run${plural}, at most ${importDurationS}s each)`,
    note: `A generated NDJSON file of ${importEvents.toLocaleString('en-US')} events (~330 bytes each), imported with the defaults (4 requests in flight, 4 MiB batches, historical_migration: true), importer and cluster on the same machine. Counted: events acknowledged by capture (stored in JetStream) per second after a 1 s warm-up, until the file ends or the time is up. Target: ≥ 100,000 events/s.`,
    columns: ['target', 'events/s', 'MB/s', 'finished the file', 'retries'],
    rows: [
      [SPATE, importEventsPerSec, med(spateImport, (x) => x.mbPerSec), spateImport?.every((x) => x.finished) ? 'yes' : 'no (cut at the deadline)', (spateImport ?? []).reduce((n, x) => n + x.retries, 0)],
      [BASELINE, med(baseImport, (x) => x.eventsPerSec), med(baseImport, (x) => x.mbPerSec), baseImport?.every((x) => x.finished) ? 'yes' : 'no (cut at the deadline)', (baseImport ?? []).reduce((n, x) => n + x.retries, 0)],
      ['Spate ÷ baseline', ratio(importEventsPerSec, med(baseImport, (x) => x.eventsPerSec)), '', '', ''],
    ],
  };
  const latencyTable: Table = {
    title: 'Capture latency at a constant offered rate (open loop, measured from when each request was due), as a share of the maximum measured above',
    columns: ['scenario', '% of max', 'offered req/s', 'achieved req/s', 'events/s', 'p50 ms', 'p90 ms', 'p99 ms', 'p99.9 ms', 'errors'],
    rows: [...latency].flatMap(([name, points]) => points.map((p) => [name, `${Math.round(p.fraction * 100)}%`, p.offeredReqPerSec, p.achievedReqPerSec, p.eventsPerSec, p.p50, p.p90, p.p99, p.p999, p.errors])),
  };
  const lagTable: Table = {
    title: 'End-to-end lag, capture → PROCESSED (workers)',
    note: lag ? 'First row: capture as fast as it goes (the pipeline maximum); then constant offered rates at fractions of it. Lag = time the processed line was read − time the request was sent.' : `End-to-end lag: ${lagNote}.`,
    columns: ['offered', 'events/s offered', 'sent', 'processed', 'processed/s', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms'],
    rows: (lag ?? []).map((p) => [p.fraction === 1 && !Number.isFinite(p.offeredEventsPerSec) ? 'maximum' : `${Math.round(p.fraction * 100)}%`, p.offeredEventsPerSec, p.sentEvents, p.processedEvents, p.processedPerSec, p.p50, p.p90, p.p99, p.max]),
  };
  const ceilings: Table = {
    title: 'Ceilings measured in the same run',
    columns: ['ceiling', 'events/s', 'MB/s'],
    rows: [['raw JetStream publish, 1 MiB messages, 16 in flight', brokerEvents, brokerMb]],
  };
  const target = (label: string, value: number, goal: number, unit: string) => [label, `≥ ${goal.toLocaleString('en-US')}${unit}`, Number.isFinite(value) ? `${value >= 100 ? Math.round(value).toLocaleString('en-US') : value.toFixed(1)}${unit}` : '–', Number.isFinite(value) ? (value >= goal ? 'met' : 'not met') : '–'];
  const speedup = (name: string) => med(spate.get(name), (x) => x.eventsPerSec) / med(base.get(name), (x) => x.eventsPerSec);
  const targets: Table = {
    title: 'Targets (issue 7)',
    columns: ['what', 'target', 'measured', ''],
    rows: [target('/batch/ of 1,000: Spate ÷ baseline', speedup('batch 1000'), 15, '×'), target('/capture/: Spate ÷ baseline', speedup('capture single'), 8, '×'), target('historical import into HISTORICAL', importEventsPerSec, 100_000, ' events/s')],
  };

  const name = new Date().toISOString().slice(0, 10) + (quick ? '-quick' : '');
  const bars: ThroughputBar[] = [];
  for (const s of scenarios) {
    bars.push({ scenario: s.name, series: SPATE, eventsPerSec: med(spate.get(s.name), (x) => x.eventsPerSec) });
    bars.push({ scenario: s.name, series: BASELINE, eventsPerSec: med(base.get(s.name), (x) => x.eventsPerSec) });
    if (s.httpCeiling) bars.push({ scenario: s.name, series: HTTP_CEILING, eventsPerSec: med(http.get(s.name), (x) => x.reqPerSec) * s.events });
    if (s.brokerCeiling) bars.push({ scenario: s.name, series: BROKER_CEILING, eventsPerSec: brokerEvents });
  }
  if (doImport) {
    bars.push({ scenario: 'historical import', series: SPATE, eventsPerSec: importEventsPerSec });
    bars.push({ scenario: 'historical import', series: BASELINE, eventsPerSec: med(baseImport, (x) => x.eventsPerSec) });
  }
  const charts: string[] = [];
  const outDir = args.out;
  mkdirSync(outDir, { recursive: true });
  await throughputChart(join(outDir, `${name}-throughput.svg`), `Events/s per scenario: Spate vs baseline and ceilings (${name})`, bars);
  charts.push(`![Throughput per scenario](${name}-throughput.svg)`);
  const latencyPoints: LatencyPoint[] = [...latency].flatMap(([scenario, points]) =>
    points.flatMap((p) => (['p50', 'p90', 'p99'] as const).map((q) => ({ percentOfMax: p.fraction * 100, series: `${scenario} ${q}`, ms: p[q] }))),
  );
  if (latencyPoints.length > 0) {
    await latencyChart(join(outDir, `${name}-latency.svg`), `Capture latency vs offered rate (${name})`, latencyPoints);
    charts.push(`![Capture latency vs offered rate](${name}-latency.svg)`);
  }
  if (lag) {
    const lagPoints = lag.filter((p) => p.fraction < 1).flatMap((p) => (['p50', 'p90', 'p99'] as const).map((q) => ({ percentOfMax: p.fraction * 100, series: `lag ${q}`, ms: p[q] })));
    await latencyChart(join(outDir, `${name}-e2e-lag.svg`), `End-to-end lag vs offered rate (${name})`, lagPoints);
    charts.push(`![End-to-end lag vs offered rate](${name}-e2e-lag.svg)`);
  }
  const tables = [targets, capture, importTable, latencyTable, lagTable, ceilings, ...(workers.table ? [workers.table] : [])];
  const files = writeResults(outDir, name, machineInfo(), tables, { spate: Object.fromEntries(spate), baseline: Object.fromEntries(base), http: Object.fromEntries(http), broker, imports: Object.fromEntries(imports), latency: Object.fromEntries(latency), lag: lag ?? lagNote, workers: workers.data }, `## Charts\n\n${charts.join('\n\n')}`);
  console.log(`\n${tables.map(markdownTable).join('\n\n')}\n\nwritten: ${files.md}`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
