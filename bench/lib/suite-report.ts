// The suite's report: its tables, charts and JSON, made from whatever the stages measured so
// far. A stage that failed or did not run says so ("failed: <reason>", "not run: <reason>") in
// its section and in the stages table; the other sections are unaffected.
import { join } from 'node:path';
import { captureScenarios, type CaptureResults, type CaptureScenario } from '../scenarios/capture.js';
import type { CpuPerEvent, PipelineResult } from '../scenarios/e2e-pipeline.js';
import type { ImportMeasurement } from '../scenarios/historical-import.js';
import type { RatePoint } from '../scenarios/latency-vs-rate.js';
import { exportThroughputTable, type ExportThroughputResult } from '../exports/throughput.js';
import { pluginDeliveryTable, type PluginDeliveryResult } from '../plugins/delivery.js';
import { pluginBenchTables, type PluginBenchResult } from '../plugins/stage.js';
import { workerThroughputTable, type WorkerThroughputResult } from '../workers/throughput.js';
import { latencyChart, throughputChart, type LatencyPoint, type ThroughputBar } from './charts.js';
import { median, type Table } from './report.js';
import { stageSummary, type StageStatus } from './stages.js';

export const STAGES = ['capture scenarios', 'latency vs rate', 'historical import', 'worker throughput', 'plugins', 'plugin delivery', 'exports', 'e2e lag'] as const;
export type StageName = (typeof STAGES)[number];

export const SPATE = 'Spate';
export const BASELINE = 'baseline (node:http, publish per event)';
const HTTP_CEILING = 'trivial uWS (HTTP ceiling)';
const BROKER_CEILING = 'raw JetStream publish (broker ceiling)';

export interface SuiteState {
  quick: boolean;
  runs: number;
  durationS: number;
  latencyDurationS: number;
  importEvents: number;
  importDurationS: number;
  stages: Map<StageName, StageStatus>;
  scenarios: CaptureScenario[];
  capture: CaptureResults;
  imports: Map<string, ImportMeasurement[]>;
  latency: Map<string, RatePoint[]>;
  workers?: WorkerThroughputResult;
  exports?: ExportThroughputResult;
  plugins?: PluginBenchResult;
  pluginDelivery?: PluginDeliveryResult;
  /** Events the e2e stage sent and had processed before measuring. */
  lagWarmUpEvents: number;
  /** Workers of the e2e stage's cluster. */
  e2eWorkers: number;
  e2e?: PipelineResult;
  /** Errors no stage caught (work left over from a stage stopped at its time limit, say). */
  uncaught: string[];
}

const ratio = (a: number, b: number) =>
  b > 0 && Number.isFinite(a) ? `${a / b >= 10 ? (a / b).toFixed(0) : (a / b).toPrecision(2)}×` : b === 0 && a > 0 ? '∞ (baseline finished nothing)' : '–';
const med = <T>(list: readonly T[] | undefined, pick: (x: T) => number) => median((list ?? []).map(pick));
const total = <T>(list: readonly T[] | undefined, pick: (x: T) => number) => (list ?? []).reduce((n, x) => n + pick(x), 0);

/** The line a section starts with when its stage did not simply succeed. */
function stageNote(state: SuiteState, stage: StageName, partial: boolean): string {
  const s = state.stages.get(stage) ?? { state: 'pending' };
  if (s.state === 'ok') return '';
  const summary = stageSummary(s);
  return `**${summary}**${s.state === 'skipped' || !partial ? '.' : ' — figures below are what it measured before that.'} `;
}

const note = (prefix: string, text: string) => `${prefix}${text}`.trim();

export function suiteTables(state: SuiteState): Table[] {
  const { capture } = state;
  const plural = state.runs > 1 ? 's' : '';
  const brokerEvents = median(capture.broker.map((b) => b.eventsPerSec));
  const measuredScenarios = state.scenarios.filter((s) => capture.spate.has(s.name));

  const stages: Table = {
    title: 'Stages',
    ...(state.uncaught.length ? { note: `Uncaught errors during the run: ${state.uncaught.map((e) => `"${e}"`).join('; ')}.` } : {}),
    columns: ['stage', 'result', 'seconds'],
    rows: STAGES.map((name) => {
      const s = state.stages.get(name) ?? { state: 'pending' };
      return [name, stageSummary(s), 'seconds' in s ? s.seconds : '–'];
    }),
  };

  const captureTable: Table = {
    title: `Capture into JetStream (median of ${state.runs} run${plural}, ${state.durationS}s each)`,
    note: note(
      stageNote(state, 'capture scenarios', measuredScenarios.length > 0),
      'Only 2xx answers count (req/s, events/s, MB/s and latency): each acknowledged by JetStream before it was sent. "503 busy" are answers 503 `overloaded` — the ingest node refusing a body its in-flight byte budget has no room for, by design (16 clients × 20 MB) — and "errors" everything else that was not 2xx (both totals over the runs). ' +
        '"× baseline" compares events/s with the baseline server (node:http, JSON.parse, one awaited JetStream publish per event; bench/baseline) given the same requests; ' +
        '"× uWS" compares requests/s with a trivial uWS handler; "× JetStream" compares events/s with raw batched publishing of the same bytes.',
    ),
    columns: ['scenario', 'conns', 'req/s', 'events/s', 'MB/s in', 'p50 ms', 'p99 ms', 'ingest CPU µs/event', 'NATS CPU µs/event', 'peak RSS MiB', 'baseline events/s', 'baseline p99 ms', '× baseline', '× uWS', '× JetStream', '503 busy', 'errors'],
    rows: measuredScenarios.map((s) => {
      const m = capture.spate.get(s.name);
      const b = capture.baseline.get(s.name);
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
        med(m, (x) => x.natsCpuUsPerEvent),
        med(m, (x) => x.rssPeakMiB),
        b ? baseEvents : 'not run',
        baseEvents > 0 ? med(b, (x) => x.p99) : '–',
        b ? ratio(eventsPerSec, baseEvents) : '–',
        s.httpCeiling ? ratio(reqPerSec, med(capture.http.get(s.name), (x) => x.reqPerSec)) : '–',
        s.brokerCeiling ? ratio(eventsPerSec, brokerEvents) : '–',
        total(m, (x) => x.busy),
        total(m, (x) => x.errors),
      ];
    }),
  };

  const spateImport = state.imports.get(SPATE);
  const baseImport = state.imports.get(BASELINE);
  const importEventsPerSec = med(spateImport, (x) => x.eventsPerSec);
  const importRow = (label: string, list: ImportMeasurement[] | undefined, missing: string) =>
    list?.length
      ? [label, med(list, (x) => x.eventsPerSec), med(list, (x) => x.mbPerSec), list.every((x) => x.finished) ? 'yes' : 'no (cut at the deadline)', total(list, (x) => x.retries)]
      : [label, '–', '–', missing, '–'];
  const importTable: Table = {
    title: `Historical import: \`spate import\` into HISTORICAL (median of ${state.runs} run${plural}, at most ${state.importDurationS}s each)`,
    note: note(
      stageNote(state, 'historical import', Boolean(spateImport?.length)),
      `A generated NDJSON file of ${state.importEvents.toLocaleString('en-US')} events (~330 bytes each), imported with the defaults (4 requests in flight, 4 MiB batches, historical_migration: true), importer and cluster on the same machine; each Spate run under a project of its own (HISTORICAL keeps message ids for an hour, so a batch sent again under the same project is a duplicate, not stored). Counted: events acknowledged by capture (stored in JetStream) per second after a 1 s warm-up, until the file ends or the time is up. Target: ≥ 100,000 events/s.`,
    ),
    columns: ['target', 'events/s', 'MB/s', 'finished the file', 'retries'],
    rows: [
      importRow(SPATE, spateImport, 'not measured'),
      importRow(BASELINE, baseImport, state.quick ? 'not run in --quick (its first 4 MiB batches take longer than a quick run)' : 'not measured'),
      ['Spate ÷ baseline', ratio(importEventsPerSec, med(baseImport, (x) => x.eventsPerSec)), '', '', ''],
    ],
  };

  const latencyRows = [...state.latency].flatMap(([name, points]) =>
    points.map((p) => [
      name,
      p.unloaded ? `unloaded (${(p.fraction * 100).toPrecision(2)}%)` : `${Math.round(p.fraction * 100)}%`,
      p.offeredReqPerSec,
      p.achievedReqPerSec,
      p.eventsPerSec,
      p.p50,
      p.p90,
      p.p99,
      p.p999,
      p.sendLagP99,
      p.busy,
      p.errors,
    ]),
  );
  const latencyTable: Table = {
    title: `Capture latency at a constant offered rate, as a share of the maximum measured above (${state.latencyDurationS}s each)`,
    note: note(
      stageNote(state, 'latency vs rate', latencyRows.length > 0),
      'Open loop: requests are sent evenly, each when it is due, and latency runs from when it was due (no coordinated omission), 2xx answers only. "unloaded" is a tiny rate, the reference for the others. "send lag" is how late the load generator itself sent requests: when it is large, the generator (same cores) was short of CPU, not the server slow.',
    ),
    columns: ['scenario', 'offered', 'offered req/s', 'achieved req/s', 'events/s', 'p50 ms', 'p90 ms', 'p99 ms', 'p99.9 ms', 'send lag p99 ms', '503 busy', 'errors'],
    rows: latencyRows,
  };

  const e2eTables = pipelineTables(state);
  const workersTable: Table = state.workers
    ? workerThroughputTable(state.workers)
    : { title: 'Worker throughput: one worker process with PostgreSQL (bench/workers)', note: stageNote(state, 'worker throughput', false).trim(), columns: [], rows: [] };

  const exportsTable: Table = state.exports
    ? exportThroughputTable(state.exports)
    : { title: 'Batch export runs: one interval from PROCESSED to each destination (bench/exports)', note: stageNote(state, 'exports', false).trim(), columns: [], rows: [] };
  const exportRate = (prefix: string) => state.exports?.runs.find((r) => r.destination.startsWith(prefix))?.eventsPerSecond ?? Number.NaN;

  const ceilings: Table = {
    title: 'Ceilings measured in the same run',
    columns: ['ceiling', 'events/s', 'MB/s'],
    rows: capture.broker.length ? [[`raw JetStream publish, ${capture.brokerMessageBytes / 1024 ** 2 >= 1 ? `${capture.brokerMessageBytes / 1024 ** 2} MiB` : `${capture.brokerMessageBytes / 1024} KiB`} messages, 16 in flight`, brokerEvents, median(capture.broker.map((b) => b.mbPerSec))]] : [],
  };
  if (!capture.broker.length) ceilings.note = 'Not measured in this run (it goes with batch 1000 and batch 20 MB).';

  const cpuTable = captureCpuTable(state);

  /** A target that `value` must reach (≥), or with `atMost` not exceed (≤). */
  const target = (label: string, value: number, goal: number, unit: string, atMost = false) => [
    label,
    `${atMost ? '≤' : '≥'} ${goal.toLocaleString('en-US')}${unit}`,
    Number.isFinite(value) ? `${value >= 100 ? Math.round(value).toLocaleString('en-US') : value >= 10 ? value.toFixed(1) : value.toPrecision(2)}${unit}` : value === Infinity ? '∞ (baseline finished nothing)' : '–',
    Number.isFinite(value) ? ((atMost ? value <= goal : value >= goal) ? 'met' : 'not met') : value === Infinity ? 'no ratio: give the baseline more time' : 'not measured',
  ];
  const e2e = state.e2e;
  const half = e2e?.paced.find((p) => p.fraction === 0.5);
  const speedup = (name: string) => med(capture.spate.get(name), (x) => x.eventsPerSec) / med(capture.baseline.get(name), (x) => x.eventsPerSec);
  const ofHttpCeiling = (name: string) => med(capture.spate.get(name), (x) => x.reqPerSec) / med(capture.http.get(name), (x) => x.reqPerSec);
  const ofBrokerCeiling = (name: string) => med(capture.spate.get(name), (x) => x.eventsPerSec) / brokerEvents;
  const targets: Table = {
    title: 'Targets (issues 7 and 17)',
    columns: ['what', 'target', 'measured', ''],
    rows: [
      target('/batch/ of 1,000: Spate ÷ baseline', speedup('batch 1000'), 15, '×'),
      target('/capture/: Spate ÷ baseline', speedup('capture single'), 8, '×'),
      target('historical import into HISTORICAL', importEventsPerSec, 100_000, ' events/s'),
      target('/capture/ single: Spate ÷ trivial uWS, same load (req/s)', ofHttpCeiling('capture single'), 0.6, '×'),
      target('/batch/ of 1,000: Spate ÷ raw JetStream publish (events/s)', ofBrokerCeiling('batch 1000'), 0.4, '×'),
      target('end to end: PROCESSED with workers running ÷ capture with workers paused', e2e?.ratio ?? Number.NaN, 0.75, '×'),
      target('end to end: capture → PROCESSED lag p99 at half the capture-alone rate', half?.p99 ?? Number.NaN, 1000, ' ms', true),
      target('whole pipeline CPU per event (ingest + NATS + worker + PostgreSQL), at half rate', half?.cpu.pipeline ?? Number.NaN, 20, ' µs', true),
      target('a fresh worker at steady speed within 20k events: its CPU per event over events 20k–40k ÷ over events 40k–100k', e2e ? freshWorkerRatio(e2e.warmUp.workerUsPer10k) : Number.NaN, 1.2, '×', true),
      ...(state.pluginDelivery?.cases ?? []).map((c) => target(`plugin destination → local HTTP server: ${c.case}`, c.spate, 20_000, ' events/s')),
      target('batch export PROCESSED → S3 JSONLines gzip', exportRate('S3, JSONLines gzip'), 100_000, ' events/s'),
      target('batch export PROCESSED → PostgreSQL COPY', exportRate('PostgreSQL'), 50_000, ' events/s'),
    ],
  };
  if (state.quick) targets.note = '--quick: a smoke test of every stage, not figures (1 s runs on a shared machine).';

  const pluginTables: Table[] = state.plugins
    ? pluginBenchTables(state.plugins)
    : [{ title: 'Plugins: what one transformation adds to the worker (bench/plugins)', note: stageNote(state, 'plugins', false).trim(), columns: [], rows: [] }];
  const deliveryTable: Table = state.pluginDelivery
    ? pluginDeliveryTable(state.pluginDelivery)
    : { title: 'Plugins: a destination delivering to a local HTTP server (bench/plugins/delivery.ts)', note: stageNote(state, 'plugin delivery', false).trim(), columns: [], rows: [] };
  return [stages, targets, captureTable, cpuTable, importTable, latencyTable, ...e2eTables, workersTable, ...pluginTables, deliveryTable, exportsTable, ceilings];
}

/**
 * A fresh worker's CPU per event over its events 20k–40k ÷ over 40k–100k (or the end of the
 * warm-up), from its CPU per event over each 10k of its events. Windows of 20k and more: a 10k
 * bucket holds only a few batches of a worker draining flat out, and moves ±50% with where their
 * commits fall.
 */
export function freshWorkerRatio(buckets: readonly number[]): number {
  if (buckets.length < 6) return Number.NaN;
  const mean = (list: readonly number[]) => list.reduce((a, b) => a + b, 0) / list.length;
  return mean(buckets.slice(2, 4)) / mean(buckets.slice(4, 10));
}

const CPU_ROLES = ['ingest', 'nats', 'worker', 'postgres', 'pipeline', 'admin', 'load'] as const;

/** The e2e stage's tables: rates and lag, CPU per event by process, a fresh worker's first events. */
function pipelineTables(state: SuiteState): Table[] {
  const e2e = state.e2e;
  const cluster = `a local cluster as \`npm start\` runs it (one nats-server, one ingest node, ${state.e2eWorkers} worker${state.e2eWorkers === 1 ? '' : 's'}, the admin server, PostgreSQL; all on this machine's cores with the load generator)`;
  const rates: Table = {
    title: 'End to end, capture → PROCESSED (issue 17)',
    note: note(
      stageNote(state, 'e2e lag', false),
      e2e
        ? `On ${cluster}; /batch/ of ${e2e.perRequest.toLocaleString('en-US')} events of the realistic mix (80% custom events of 20,000 persons, 10% $identify, 5% $create_alias, 5% $groupidentify), 16 connections, after a warm-up of ${e2e.warmUp.events.toLocaleString('en-US')} events at 5,000 events/s. "capture alone": the workers paused (SIGSTOP), capture as fast as it goes; "running": the same with the workers running, and how fast events came out of PROCESSED meanwhile; then constant offered rates at fractions of capture alone. Lag = when the processed line was read − when its request was made.`
        : '',
    ),
    columns: ['phase', 'offered events/s', 'captured events/s', 'processed events/s', '÷ capture alone', 'kept pace', 'capture p99 ms', 'lag p50 ms', 'lag p90 ms', 'lag p99 ms', 'lag max ms'],
    rows: e2e
      ? [
          ['capture alone (workers paused)', 'as fast as it goes', e2e.captureAlone.capturedPerSec, '–', '–', '–', e2e.captureAlone.captureP99Ms, '–', '–', '–', '–'],
          ['capture and workers running', 'as fast as it goes', e2e.running.capturedPerSec, e2e.running.processedPerSec, `${e2e.ratio.toFixed(2)}×`, '–', e2e.running.captureP99Ms, '–', '–', '–', '–'],
          ...e2e.paced.map((p) => [
            `${Math.round(p.fraction * 100)}% of capture alone`,
            p.offeredEventsPerSec,
            p.sentEvents / state.durationS,
            p.processedPerSec,
            '–',
            p.keptPace === false ? 'no: fell behind' : 'yes',
            '–',
            p.p50,
            p.p90,
            p.p99,
            p.max,
          ]),
        ]
      : [],
  };
  const cpuRow = (phase: string, c: CpuPerEvent) => [phase, ...CPU_ROLES.map((r) => c[r] ?? Number.NaN)];
  const cpu: Table = {
    title: 'Where the CPU goes end to end: µs per event by process (/proc, same run)',
    note: e2e
      ? 'User + system CPU of each process ÷ events. Capture alone: over the phase, per event captured. Running: over the phase, per event out of PROCESSED meanwhile (capture took more). Constant rates: from the phase\'s first request until its last event came out of PROCESSED, per event sent: all it cost to process them, whether or not the pipeline kept pace (behind, its batches grow and cost less per event). "pipeline" = ingest + nats + worker + postgres; "load" is the bench process (load generator and the PROCESSED reader).'
      : stageNote(state, 'e2e lag', false).trim(),
    columns: ['phase', ...CPU_ROLES],
    rows: e2e
      ? [cpuRow('capture alone (per event captured)', e2e.captureAlone.cpu), cpuRow('running (per event processed)', e2e.running.cpu), ...e2e.paced.map((p) => cpuRow(`${Math.round(p.fraction * 100)}% of capture alone`, p.cpu))]
      : [],
  };
  const fresh: Table = {
    title: 'A fresh worker: CPU µs per event over each 10k events of its life (warm-up, /proc)',
    note: e2e ? 'The cluster\'s worker from its start, on an empty database (its first events create the 20,000 persons), during the warm-up: 5,000 events/s.' : '',
    columns: ['events', 'worker µs/event'],
    rows: (e2e?.warmUp.workerUsPer10k ?? []).map((us, i) => [`${i * 10}k–${(i + 1) * 10}k`, us]),
  };
  return [rates, cpu, fresh];
}

/**
 * CPU per request (capture single) and per event (batch 1000) of every process that served the
 * load, Spate's and its ceiling's, from /proc in the same run. Load generator, servers and
 * nats-server share the machine's cores, so when the cores are the limit, throughput goes as the
 * inverse of the CPU all of them spend per unit: "ceiling ÷ Spate CPU" is the ratio that CPU
 * alone allows, next to the measured one. With a worker stage in the same run, the ingest node's
 * share of the whole pipeline's CPU per event (ingest, NATS, worker, PostgreSQL) follows.
 */
function captureCpuTable(state: SuiteState): Table {
  const { capture } = state;
  const rows: (string | number)[][] = [];
  const single = capture.spate.get('capture single');
  const singleCeiling = capture.http.get('capture single');
  if (single?.length && singleCeiling?.length) {
    const ingest = med(single, (x) => x.ingestCpuUsPerEvent);
    const nats = med(single, (x) => x.natsCpuUsPerEvent);
    const load = med(single, (x) => x.loadCpuUsPerRequest);
    const server = med(singleCeiling, (x) => x.serverCpuUsPerRequest);
    const ceilingLoad = med(singleCeiling, (x) => x.loadCpuUsPerRequest);
    const measured = med(single, (x) => x.reqPerSec) / med(singleCeiling, (x) => x.reqPerSec);
    rows.push(['capture single (per request)', ingest, nats, load, ingest + nats + load, 'trivial uWS', server, ceilingLoad, server + ceilingLoad, (server + ceilingLoad) / (ingest + nats + load), measured]);
  }
  const batch = capture.spate.get('batch 1000');
  if (batch?.length && capture.broker.length) {
    const ingest = med(batch, (x) => x.ingestCpuUsPerEvent);
    const nats = med(batch, (x) => x.natsCpuUsPerEvent);
    const load = med(batch, (x) => x.loadCpuUsPerRequest) / 1000;
    const server = med(capture.broker, (x) => x.natsCpuUsPerEvent);
    const client = med(capture.broker, (x) => x.clientCpuUsPerEvent);
    const measured = med(batch, (x) => x.eventsPerSec) / median(capture.broker.map((b) => b.eventsPerSec));
    rows.push(['batch 1000 (per event)', ingest, nats, load, ingest + nats + load, 'raw JetStream publish', server, client, server + client, (server + client) / (ingest + nats + load), measured]);
  }
  const steady = state.workers?.throughput.steady;
  let share = '';
  if (batch?.length && steady) {
    const ingest = med(batch, (x) => x.ingestCpuUsPerEvent);
    const captureNats = med(batch, (x) => x.natsCpuUsPerEvent);
    const { workerUsPerEvent, postgresUsPerEvent, natsUsPerEvent } = steady.cpu;
    const whole = ingest + captureNats + workerUsPerEvent + postgresUsPerEvent + natsUsPerEvent;
    share =
      ` Whole pipeline per event in this run: ingest ${ingest.toFixed(1)} (batch 1000) + NATS ${(captureNats + natsUsPerEvent).toFixed(1)} (capture and worker side)` +
      ` + worker ${workerUsPerEvent} + PostgreSQL ${postgresUsPerEvent} (steady worker stage) = ${whole.toFixed(1)} µs; the ingest node's share: ${((100 * ingest) / whole).toFixed(0)}%.`;
  }
  return {
    title: 'Where the CPU goes: capture and its ceilings, µs per request or event (/proc, same run)',
    note:
      'User + system CPU from /proc of each process while it served the load: the ingest node (with its parse threads), nats-server, and the load generator (the bench process: autocannon; for raw JetStream publishing, the publishing client). ' +
      'They share the same cores, so where the cores are the limit, throughput goes as the inverse of the CPU spent per request: "ceiling ÷ Spate CPU" is the ratio the CPU allows, next to the measured one.' +
      share,
    columns: ['scenario', 'ingest', 'NATS', 'load generator', 'Spate total', 'ceiling', 'ceiling server', 'ceiling load generator / client', 'ceiling total', 'ceiling ÷ Spate CPU', 'measured ÷ ceiling'],
    rows,
  };
}

/** Everything measured, every run (the tables hold medians). */
export function suiteData(state: SuiteState): unknown {
  const brokerScenarios = state.scenarios.filter((s) => s.brokerCeiling && state.capture.spate.has(s.name)).map((s) => s.name);
  return {
    stages: Object.fromEntries(state.stages),
    capture: { spate: state.capture.spate, baseline: state.capture.baseline, http: state.capture.http, broker: state.capture.broker, brokerScenarios },
    imports: state.imports,
    latency: state.latency,
    e2e: state.e2e ?? null,
    workers: state.workers ?? null,
    exports: state.exports ?? null,
    plugins: state.plugins ?? null,
    pluginDelivery: state.pluginDelivery ?? null,
  };
}

/** A measurement as the JSON report holds it (a figure that was not a number is null). */
interface Figures {
  eventsPerSec: number | null;
}
interface Percentiles {
  fraction: number;
  p50: number | null;
  p90: number | null;
  p99: number | null;
}

/** What the charts are drawn from: the `data` of a report's JSON file (suiteData, Maps as objects). */
export interface SuiteChartData {
  capture: {
    spate: Record<string, Figures[]>;
    baseline: Record<string, Figures[]>;
    http: Record<string, Figures[]>;
    broker: Figures[];
    /** Scenarios compared with the broker ceiling; reports written before it was recorded lack it. */
    brokerScenarios?: string[];
  };
  imports: Record<string, Figures[]>;
  latency: Record<string, Percentiles[]>;
  /** Reports before 2026-11-28 (the e2e lag stage at fractions of the pipeline's maximum). */
  lag?: Percentiles[] | null;
  e2e?: { paced: Percentiles[] } | null;
}

const eventsPerSec = (list: readonly Figures[] | undefined) => median((list ?? []).map((x) => x.eventsPerSec ?? Number.NaN));
const figure = (v: number | null) => v ?? Number.NaN;

/**
 * Draws the charts there is data for, from a report's JSON data (so the charts of a committed
 * report can be drawn again: bench/charts.ts); returns their Markdown.
 */
export async function suiteCharts(data: SuiteChartData, outDir: string, name: string): Promise<string> {
  const { capture } = data;
  const charts: string[] = [];
  const bars: ThroughputBar[] = [];
  const brokerScenarios = new Set(capture.brokerScenarios ?? captureScenarios('', { quick: false }).filter((s) => s.brokerCeiling).map((s) => s.name));
  for (const [scenario, measured] of Object.entries(capture.spate)) {
    bars.push({ scenario, series: SPATE, eventsPerSec: eventsPerSec(measured) });
    bars.push({ scenario, series: BASELINE, eventsPerSec: eventsPerSec(capture.baseline[scenario]) });
    // The trivial handler's events/s: its requests/s times the events in each request.
    if (capture.http[scenario]) bars.push({ scenario, series: HTTP_CEILING, eventsPerSec: eventsPerSec(capture.http[scenario]) });
    if (brokerScenarios.has(scenario)) bars.push({ scenario, series: BROKER_CEILING, eventsPerSec: eventsPerSec(capture.broker) });
  }
  for (const series of [SPATE, BASELINE]) {
    const list = data.imports[series];
    if (list?.length) bars.push({ scenario: 'historical import', series, eventsPerSec: eventsPerSec(list) });
  }
  if (bars.some((b) => b.eventsPerSec > 0)) {
    await throughputChart(join(outDir, `${name}-throughput.svg`), `Events/s per scenario: Spate vs baseline and ceilings (${name})`, bars);
    charts.push(`![Throughput per scenario](${name}-throughput.svg)`);
  }
  const percentiles = (p: Percentiles, series: (q: string) => string): LatencyPoint[] =>
    (['p50', 'p90', 'p99'] as const).map((q) => ({ percentOfMax: p.fraction * 100, series: series(q), ms: figure(p[q]) }));
  const latencyPoints = Object.entries(data.latency).flatMap(([scenario, points]) => points.flatMap((p) => percentiles(p, (q) => `${scenario} ${q}`)));
  if (latencyPoints.some((p) => Number.isFinite(p.ms))) {
    await latencyChart(join(outDir, `${name}-latency.svg`), `Capture latency vs offered rate (${name})`, latencyPoints);
    charts.push(`![Capture latency vs offered rate](${name}-latency.svg)`);
  }
  // Older reports: the first lag point is the pipeline's maximum, not a share of it.
  const lagPoints = (data.e2e?.paced ?? data.lag ?? []).filter((p) => p.fraction < 1).flatMap((p) => percentiles(p, (q) => `lag ${q}`));
  if (lagPoints.some((p) => Number.isFinite(p.ms))) {
    await latencyChart(join(outDir, `${name}-e2e-lag.svg`), `End-to-end lag vs offered rate (${name})`, lagPoints);
    charts.push(`![End-to-end lag vs offered rate](${name}-e2e-lag.svg)`);
  }
  return charts.length ? `## Charts\n\n${charts.join('\n\n')}` : '';
}
