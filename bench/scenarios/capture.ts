// Scenarios: capture throughput of one ingest node (capture single; batch 100 / 1,000 / 20 MB)
// against, in the same run, the trivial uWS handler (HTTP ceiling), raw batched JetStream
// publishing (broker ceiling) and the baseline server given the same requests.
import { measureJetStreamPublish, type PublishCeiling } from '../ceilings/jetstream-publish.js';
import type { CaptureRig } from '../lib/capture-rig.js';
import { runLoad, type LoadResult } from '../lib/load.js';
import { batchBody, batchOfSize, singleBody } from '../lib/payloads.js';
import { cpuSeconds, sampleRss } from '../lib/processes.js';

export interface CaptureScenario {
  name: string;
  path: string;
  /** Made once, when the scenario is first measured (a 20 MB body is not made unless wanted). */
  body: () => { body: string; events: number };
  connections: number;
  /** Compare with the trivial uWS handler answering the same requests. */
  httpCeiling?: boolean;
  /** Compare with raw JetStream publishing of the same bytes. */
  brokerCeiling?: boolean;
  trackRss?: boolean;
  /**
   * The baseline given the same requests: 'yes'; 'restart after' when it keeps working on them
   * long after the load stopped (20 MB bodies published event by event) and must be restarted
   * before anything else is measured; 'no' when it is not measured at all.
   */
  baseline: 'yes' | 'restart after' | 'no';
  /** Also measure latency at fractions of this scenario's maximum. */
  latency?: boolean;
  /** Seconds at least (a 20 MB request takes seconds; a 1 s quick run would finish none). */
  minDurationS?: number;
}

/** CPU (user + system, from /proc) per request, of the load generator: this process, which runs autocannon. */
interface LoadCpu {
  loadCpuUsPerRequest: number;
}

export interface Measured extends LoadResult, LoadCpu {
  ingestCpuUsPerEvent: number;
  /** nats-server's CPU per acknowledged event (storing what the ingest node published). */
  natsCpuUsPerEvent: number;
  rssPeakMiB: number;
}

/** The trivial uWS handler under the same load. */
export interface HttpCeiling extends LoadResult, LoadCpu {
  serverCpuUsPerRequest: number;
}

/** Raw JetStream publishing: nats-server's CPU and the publishing client's (this process) per event. */
export interface BrokerCeiling extends PublishCeiling {
  natsCpuUsPerEvent: number;
  clientCpuUsPerEvent: number;
}

export interface CaptureResults {
  spate: Map<string, Measured[]>;
  baseline: Map<string, LoadResult[]>;
  http: Map<string, HttpCeiling[]>;
  broker: BrokerCeiling[];
  /** Size of the broker ceiling's messages. */
  brokerMessageBytes: number;
  /** Events per request of each measured scenario. */
  events: Map<string, number>;
}

const MB20 = 20 * 1024 * 1024;

const once = <T>(make: () => T): (() => T) => {
  let made: { value: T } | undefined;
  return () => (made ??= { value: make() }).value;
};

/** --quick (a smoke test, not figures) compares batches with the trivial uWS handler only in full runs. */
export function captureScenarios(key: string, o: { quick: boolean }): CaptureScenario[] {
  return [
    { name: 'capture single', path: '/capture/', body: once(() => ({ body: singleBody(key), events: 1 })), connections: 50, httpCeiling: true, baseline: 'yes', latency: true },
    { name: 'batch 100', path: '/batch/', body: once(() => ({ body: batchBody(key, 100), events: 100 })), connections: 32, httpCeiling: !o.quick, baseline: 'yes', latency: !o.quick },
    { name: 'batch 1000', path: '/batch/', body: once(() => ({ body: batchBody(key, 1000), events: 1000 })), connections: 16, httpCeiling: !o.quick, brokerCeiling: true, baseline: 'yes' },
    // The baseline finishes no 20 MB request in a run of any length here: --quick does not try.
    { name: 'batch 20 MB', path: '/batch/', body: once(() => batchOfSize(key, MB20)), connections: 16, brokerCeiling: true, trackRss: true, minDurationS: o.quick ? 4 : 5, baseline: o.quick ? 'no' : 'restart after' },
  ];
}

/** Messages of the broker ceiling: 1 MiB, as the ingest node packs them; --quick makes smaller ones (building 1 MiB ones takes seconds). */
export function emptyCaptureResults(o: { quick: boolean }): CaptureResults {
  return { spate: new Map(), baseline: new Map(), http: new Map(), broker: [], brokerMessageBytes: (o.quick ? 256 : 1024) * 1024, events: new Map() };
}


/** This process's CPU seconds (user + system) so far. */
function ownCpuSeconds(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e6;
}

/** Per-unit microseconds of `seconds` over `count` units; NaN when nothing was counted. */
const perUnitUs = (seconds: number, count: number) => (count > 0 ? (seconds / count) * 1e6 : Number.NaN);

/** Measures every scenario `runs` times, adding each figure to `into` as soon as it is measured. */
export async function measureCapture(
  o: { rig: CaptureRig; scenarios: readonly CaptureScenario[]; runs: number; durationS: number; signal: AbortSignal; log: (m: string) => void; onMeasured?: () => void },
  into: CaptureResults,
): Promise<void> {
  const { rig, signal } = o;
  const push = <V>(map: Map<string, V[]>, key: string, value: V) => {
    map.set(key, [...(map.get(key) ?? []), value]);
    o.onMeasured?.();
  };
  const prepare = async () => {
    signal.throwIfAborted();
    await rig.purge();
    await rig.quiet();
    signal.throwIfAborted();
  };
  for (let run = 1; run <= o.runs; run++) {
    for (const s of o.scenarios) {
      const { body, events } = s.body();
      into.events.set(s.name, events);
      const load = { body, eventsPerRequest: events, connections: s.connections, signal };
      const durationS = Math.max(s.minDurationS ?? 0, o.durationS);
      await prepare();
      o.log(`run ${run}/${o.runs}: ${s.name} (${s.connections} connections, ${durationS}s)`);
      const before = { ingest: cpuSeconds(rig.ingestPid), nats: cpuSeconds(rig.natsPid), load: ownCpuSeconds() };
      const rss = s.trackRss ? sampleRss(rig.ingestPid) : undefined;
      const r = await runLoad({ ...load, url: `${rig.captureUrl}${s.path}`, durationS });
      signal.throwIfAborted(); // a run cut short by the time limit is not a figure
      const rssPeak = rss?.stop() ?? Number.NaN;
      const acknowledged = r.ok * events;
      push(into.spate, s.name, {
        ...r,
        ingestCpuUsPerEvent: perUnitUs(cpuSeconds(rig.ingestPid) - before.ingest, acknowledged),
        natsCpuUsPerEvent: perUnitUs(cpuSeconds(rig.natsPid) - before.nats, acknowledged),
        loadCpuUsPerRequest: perUnitUs(ownCpuSeconds() - before.load, r.requests),
        rssPeakMiB: rssPeak / 1024 ** 2,
      });
      if (s.httpCeiling) {
        await prepare();
        o.log(`run ${run}/${o.runs}: ${s.name} → trivial uWS`);
        const at = { server: cpuSeconds(rig.trivialPid), load: ownCpuSeconds() };
        const ceiling = await runLoad({ ...load, url: `${rig.trivialUrl}${s.path}`, durationS });
        signal.throwIfAborted();
        push(into.http, s.name, {
          ...ceiling,
          serverCpuUsPerRequest: perUnitUs(cpuSeconds(rig.trivialPid) - at.server, ceiling.requests),
          loadCpuUsPerRequest: perUnitUs(ownCpuSeconds() - at.load, ceiling.requests),
        });
      }
      if (s.baseline === 'no') continue;
      await prepare();
      o.log(`run ${run}/${o.runs}: ${s.name} → baseline`);
      // The baseline gets the base duration even where Spate gets longer: it finishes no 20 MB request in either.
      const base = await runLoad({ ...load, url: `${rig.baselineUrl}${s.path}`, durationS: o.durationS });
      if (s.baseline === 'restart after') await rig.restartBaseline();
      signal.throwIfAborted();
      push(into.baseline, s.name, base);
    }
    if (o.scenarios.some((s) => s.brokerCeiling)) {
      await prepare();
      o.log(`run ${run}/${o.runs}: raw JetStream publish ceiling`);
      const natsBefore = cpuSeconds(rig.natsPid);
      const broker = await measureJetStreamPublish(rig.natsUrl, rig.natsAuth, { durationS: o.durationS, messageBytes: into.brokerMessageBytes, inFlight: 16 });
      into.broker.push({
        ...broker,
        natsCpuUsPerEvent: perUnitUs(cpuSeconds(rig.natsPid) - natsBefore, broker.events),
        clientCpuUsPerEvent: perUnitUs(broker.clientCpuSeconds, broker.events),
      });
      o.onMeasured?.();
    }
  }
}
