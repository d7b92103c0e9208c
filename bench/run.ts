// `npm run bench [-- --quick] [--runs N] [--duration S] [--only NAME] [--stage-timeout S] [--out DIR]`
// Capture throughput of one ingest node against, in the same run: the ceilings (a trivial uWS
// handler: HTTP floor; raw batched JetStream publishing: broker floor) and the baseline (the
// straightforward node:http + publish-per-event server in bench/baseline, not part of the
// product). Also latency at 25/50/75% of the measured maximum, the historical import
// (`spate import`), worker throughput (bench/workers), batch export runs (bench/exports) and
// end-to-end capture → processed lag.
//
// Each of those is a stage with a time limit (bench/lib/stages.ts): one that fails or overruns
// is reported as "failed: <reason>" and the others still run. The report (bench/results/<date>.md,
// .json, SVG charts) is rewritten after every stage, so what was measured is never lost.
import { join } from 'node:path';
import { parseBenchArgs, usageError } from './lib/cli.js';
import { BENCH_KEY, startCaptureRig, type CaptureRig } from './lib/capture-rig.js';
import { writeEventsFile } from './lib/generate-events.js';
import { scratchDir } from './lib/processes.js';
import { asJson, markdownTable, median, writeResults } from './lib/report.js';
import { runInfo } from './lib/run-info.js';
import { describeError, runStage, stageSummary, type StageStatus } from './lib/stages.js';
import { runPluginDelivery } from './plugins/delivery.js';
import { runPluginBench } from './plugins/stage.js';
import { BASELINE, SPATE, STAGES, suiteCharts, suiteData, suiteTables, type StageName, type SuiteChartData, type SuiteState } from './lib/suite-report.js';
import { captureScenarios, emptyCaptureResults, measureCapture } from './scenarios/capture.js';
import { runEndToEnd } from './scenarios/e2e-cluster.js';
import { measureImport } from './scenarios/historical-import.js';
import { latencyVsRate, type RatePoint } from './scenarios/latency-vs-rate.js';
import { measureWorkerThroughput } from './scenarios/worker-throughput.js';
import { runExportThroughput } from './exports/throughput.js';

const benchStarted = performance.now();
const elapsedS = () => (performance.now() - benchStarted) / 1000;
const log = (m: string) => console.error(`[bench +${elapsedS().toFixed(1)}s] ${m}`);

const USAGE = `usage: npm run bench -- [--quick] [--runs N] [--duration S] [--only NAME] [--stage-timeout S] [--out DIR]

Measures Spate on this machine against, in the same run, a trivial uWS handler and raw JetStream
publishing (the ceilings) and a straightforward node:http server (the baseline): capture
throughput, latency at 25/50/75% of the maximum, the historical import, one worker's throughput,
batch export runs (PROCESSED to S3 and PostgreSQL) and end-to-end lag on a whole local cluster. Writes <date>.md, <date>.json and SVG charts to
bench/results/.

  --quick            a smoke test of every stage in under a minute (1 s runs, small sizes; no
                     end-to-end stage unless --only names it): not figures
  --runs N           runs per measurement, reported as medians (default 3; 1 with --quick)
  --duration S       seconds per measurement (default 10; 1 with --quick)
  --only NAME        only the stages and scenarios whose name contains NAME, any case
                     (capture single, batch, 20 MB, latency, import, worker, exports, e2e)
  --stage-timeout S  time limit of every stage (default: about twice what each should take)
  --out DIR          where the report goes (default bench/results)
  -h, --help         this text`;

const { values: args } = parseBenchArgs(USAGE, {
  options: {
    quick: { type: 'boolean', default: false },
    runs: { type: 'string' },
    duration: { type: 'string' },
    only: { type: 'string' },
    'stage-timeout': { type: 'string' },
    out: { type: 'string', default: new URL('../../bench/results', import.meta.url).pathname },
  },
});

function positive(option: string, value: string | undefined, fallback: number, integer = false): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!(n > 0) || (integer && !Number.isInteger(n))) usageError(USAGE, `--${option} must be a positive ${integer ? 'integer' : 'number'} (got ${JSON.stringify(value)})`);
  return n;
}

const quick = args.quick;
const runs = positive('runs', args.runs, quick ? 1 : 3, true);
const durationS = positive('duration', args.duration, quick ? 1 : 10);
const stageTimeoutS = args['stage-timeout'] === undefined ? undefined : positive('stage-timeout', args['stage-timeout'], 0);
const FRACTIONS = [0.25, 0.5, 0.75] as const;
// --quick is a smoke test in under a minute (ARCHITECTURE.md), not figures: 1 s runs, small
// sizes, short waits for idle servers, and no end-to-end stage unless --only names it (it
// starts a whole cluster: PostgreSQL, admin, ingest and workers).
const latencyWarmupS = quick ? 0.25 : 1;
const quietMaxS = quick ? 1 : 10;
const importEvents = quick ? 150_000 : 2_000_000;
// Long enough for the sustained rate to show after a 1 s warm-up.
const importDurationS = quick ? 2 : Math.max(5, durationS);
// Issue 17's targets: at half the rate capture takes alone; a quarter as a reference.
const e2eFractions: readonly number[] = quick ? [0.5] : [0.25, 0.5];
// The default cluster of `npm start`.
const e2eWorkers = 1;
// Long enough to see a fresh worker's CPU per event settle (reported per 10k events).
const e2eWarmUpEvents = quick ? 20_000 : 100_000;

/** --only NAME: a stage or scenario runs when NAME (any case) is part of one of its names. */
const only = args.only?.toLowerCase();
const wanted = (...names: string[]) => !only || names.some((n) => n.toLowerCase().includes(only));

const scenarios = captureScenarios(BENCH_KEY, { quick }).filter((s) => wanted(s.name) || (s.latency && wanted('latency vs rate')));
const state: SuiteState = {
  quick,
  runs,
  durationS,
  latencyDurationS: durationS,
  importEvents,
  importDurationS,
  lagWarmUpEvents: e2eWarmUpEvents,
  e2eWorkers,
  stages: new Map(STAGES.map((s) => [s, { state: 'pending' }])),
  scenarios,
  capture: emptyCaptureResults({ quick }),
  imports: new Map(),
  latency: new Map(),
  uncaught: [],
};

// Work a stage abandoned at its time limit may still fail later: reported, but the run goes on.
const onUncaught = (err: unknown) => {
  state.uncaught.push(describeError(err));
  log(`uncaught error: ${describeError(err)}`);
};
process.on('uncaughtException', onUncaught);
process.on('unhandledRejection', onUncaught);

/** Time limits: about twice what each stage should take, plus room for starting servers. */
const limits: Record<StageName, number> = {
  'capture scenarios': 60 + 2 * runs * scenarios.reduce((sum, s) => sum + 3 * (Math.max(s.minDurationS ?? 0, durationS) + 2), durationS + 2),
  'latency vs rate': 60 + 2 * scenarios.filter((s) => s.latency).length * (FRACTIONS.length + 1) * (durationS + latencyWarmupS + 5),
  'historical import': 60 + 2 * runs * 2 * (importDurationS + 15),
  'worker throughput': quick ? 150 : 900,
  plugins: quick ? 60 : 300,
  // Its own nats-server, PostgreSQL and worker; three destinations, each with its ceiling.
  'plugin delivery': quick ? 120 : 600,
  exports: quick ? 120 : 600,
  // Start, warm-up, two flat-out phases and the constant rates, each with its drain.
  'e2e lag': 240 + (e2eFractions.length + 2) * (durationS + 120),
};

const info = runInfo();
const name = info.date.slice(0, 10) + (quick ? '-quick' : '');
const outDir = args.out;

/** Tables and JSON: after every measurement, stage and on Ctrl-C. Never throws. */
function writeReport(): void {
  try {
    writeResults(outDir, name, { info, tables: suiteTables(state), data: suiteData(state) });
  } catch (err) {
    log(`could not write the report: ${describeError(err)}`);
  }
}

// Ctrl-C (or a kill) keeps what was measured; children are killed on exit (bench/lib/processes.ts).
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.prependOnceListener(signal, () => {
    for (const [stageName, s] of state.stages) if (s.state === 'running') state.stages.set(stageName, { state: 'failed', seconds: Number.NaN, reason: `interrupted (${signal})` });
    writeReport();
    process.exit(130);
  });
}

/** Runs one stage with its time limit, records how it went and rewrites the report. */
async function stage(stageName: StageName, work: (signal: AbortSignal) => Promise<void>): Promise<StageStatus> {
  const limitS = stageTimeoutS ?? limits[stageName];
  state.stages.set(stageName, { state: 'running' });
  log(`stage ${stageName} (time limit ${Math.round(limitS)} s)`);
  const status = await runStage(work, { limitS });
  state.stages.set(stageName, status);
  log(`stage ${stageName}: ${stageSummary(status)}${'seconds' in status ? ` (${status.seconds.toFixed(1)} s)` : ''}`);
  writeReport();
  return status;
}

function skip(stageName: StageName, reason: string): void {
  state.stages.set(stageName, { state: 'skipped', reason });
  log(`stage ${stageName}: not run (${reason})`);
}

async function main(): Promise<void> {
  const dir = scratchDir('bench');
  log(`commit ${info.commit}; ${info.command}`);
  const onlyReason = `--only ${JSON.stringify(args.only)}`;

  // ---- capture scenarios, latency vs rate, historical import: one ingest node and its ceilings ----
  const doCapture = scenarios.length > 0;
  const latencyScenarios = scenarios.filter((s) => s.latency);
  const doImport = wanted('historical import', 'import');
  let rig: CaptureRig | undefined;
  let rigFailure: string | undefined;
  if (doCapture || doImport) {
    log('starting nats-server, an ingest node, the trivial uWS ceiling and the baseline');
    const status = await runStage(
      async (signal) => {
        rig = await startCaptureRig(join(dir, 'nats'), { quietMaxS, signal });
      },
      { limitS: 120 },
    );
    if (status.state === 'failed') rigFailure = `the ingest node and its ceilings did not start: ${status.reason}`;
  }
  const withRig = async (stageName: StageName, work: (rig: CaptureRig, signal: AbortSignal) => Promise<void>) => {
    if (rigFailure) {
      state.stages.set(stageName, { state: 'failed', seconds: 0, reason: rigFailure });
      return;
    }
    await stage(stageName, (signal) => work(rig!, signal));
  };

  if (doCapture) {
    await withRig('capture scenarios', (r, signal) => measureCapture({ rig: r, scenarios, runs, durationS, signal, log, onMeasured: writeReport }, state.capture));
  } else skip('capture scenarios', onlyReason);

  if (latencyScenarios.length > 0) {
    await withRig('latency vs rate', async (r, signal) => {
      const missing: string[] = [];
      for (const s of latencyScenarios) {
        // At fractions of the median maximum (requests/s) measured by the capture stage.
        const max = median((state.capture.spate.get(s.name) ?? []).map((m) => m.reqPerSec));
        if (!(max > 0)) {
          missing.push(s.name);
          continue;
        }
        const points: RatePoint[] = [];
        state.latency.set(s.name, points);
        const { body, events } = s.body();
        await r.purge();
        await latencyVsRate(
          { url: r.captureUrl, path: s.path, body, eventsPerRequest: events, connections: s.connections, durationS, warmupS: latencyWarmupS, maxReqPerSec: max, fractions: FRACTIONS, beforePoint: () => r.quiet(), onMeasured: writeReport, signal, log },
          points,
        );
      }
      if (missing.length) throw new Error(`no maximum measured for ${missing.join(', ')} (see the capture stage)`);
    });
  } else skip('latency vs rate', onlyReason);

  if (doImport) {
    await withRig('historical import', async (r, signal) => {
      // More events than the importer can send in the time given.
      const importFile = join(dir, 'import.ndjson');
      log(`writing ${importEvents.toLocaleString('en-US')} events for the import`);
      await writeEventsFile(importFile, { count: importEvents });
      // The baseline's first 4 MiB batches (one awaited publish per event) take longer than a quick run.
      const targets = quick ? [SPATE] : [SPATE, BASELINE];
      for (let run = 1; run <= runs; run++) {
        for (const series of targets) {
          // Read each time: restarting the baseline moves it to a new port.
          const url = series === SPATE ? r.captureUrl : r.baselineUrl;
          // The baseline sets no message ids: any key will do.
          const key = series === SPATE ? await r.freshProjectKey() : BENCH_KEY;
          signal.throwIfAborted();
          await r.purge();
          await r.quiet();
          log(`run ${run}/${runs}: historical import → ${series === SPATE ? 'Spate' : 'baseline'}`);
          const m = await measureImport({ captureUrl: url, key, file: importFile, durationS: importDurationS, warmupS: 1, workDir: dir, signal });
          signal.throwIfAborted();
          state.imports.set(series, [...(state.imports.get(series) ?? []), m]);
          writeReport();
          // Cut off at the deadline, the baseline goes on publishing the bodies in flight event by
          // event (~50,000 events: longer than quiet() waits), and would load the next Spate run.
          if (series === BASELINE) await r.restartBaseline();
        }
      }
    });
  } else skip('historical import', onlyReason);

  if (rig) {
    log('stopping the ingest node, ceilings and baseline');
    await rig.stop();
  }

  // ---- worker throughput: its own nats-server, PostgreSQL and one worker process ----
  if (wanted('worker throughput', 'workers')) {
    await stage('worker throughput', async (signal) => {
      state.workers = await measureWorkerThroughput({ quick, signal, log });
    });
  } else skip('worker throughput', onlyReason);

  // ---- plugins: the worker's batch path with and without one transformation, in one process ----
  if (wanted('plugins', 'transformation')) {
    await stage('plugins', async () => {
      state.plugins = await runPluginBench({ quick, log });
    });
  } else skip('plugins', onlyReason);

  // ---- plugin delivery: a destination from PROCESSED to a local HTTP server, and its ceiling ----
  if (wanted('plugin delivery', 'destination')) {
    await stage('plugin delivery', async (signal) => {
      state.pluginDelivery = await runPluginDelivery({ events: quick ? 10_000 : 200_000, log, signal });
    });
  } else skip('plugin delivery', onlyReason);

  // ---- batch exports: one interval of 1M events (100k with --quick) to S3 and PostgreSQL ----
  if (wanted('exports', 'batch export')) {
    await stage('exports', async (signal) => {
      state.exports = await runExportThroughput({ events: quick ? 100_000 : 1_000_000, log, signal });
    });
  } else skip('exports', onlyReason);

  // ---- end to end: a whole local cluster (the launcher) with workers ----
  if (!wanted('e2e lag', 'end-to-end lag')) skip('e2e lag', onlyReason);
  else if (quick && !only) skip('e2e lag', '--quick (it starts a whole cluster; `npm run bench -- --quick --only e2e` runs it)');
  else {
    await stage('e2e lag', async (signal) => {
      state.e2e = await runEndToEnd({ dataDir: join(dir, 'cluster'), durationS, fractions: e2eFractions, workers: e2eWorkers, warmUpEvents: e2eWarmUpEvents, log, signal });
    });
  }

  const tables = suiteTables(state);
  // Drawn from the data as the JSON file holds it, as bench/charts.ts draws a committed report again.
  const charts = await suiteCharts(asJson(suiteData(state)) as SuiteChartData, outDir, name).catch((err: unknown) => `## Charts\n\nnot drawn: ${describeError(err)}`);
  const files = writeResults(outDir, name, { info, elapsedS: elapsedS(), tables, data: suiteData(state), extra: charts });
  const failed = [...state.stages].filter(([, s]) => s.state === 'failed');
  console.log(`\n${tables.map(markdownTable).join('\n\n')}\n\nwritten: ${files.md}`);
  console.log(`elapsed: ${elapsedS().toFixed(1)} s${failed.length ? `; failed stages: ${failed.map(([n]) => n).join(', ')}` : ''}`);
  process.exitCode = failed.length || state.uncaught.length ? 1 : 0;
}

main().then(
  // Work abandoned by an overrun stage may still hold timers or sockets.
  () => process.exit(),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
