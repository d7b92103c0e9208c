// Scenario: the whole pipeline, capture → PROCESSED, with /batch/ of 1,000 events of the realistic
// mix (bench/lib/mix-bodies.ts), measured as issue 17 states its targets, all in one run:
//   1. warm-up: events sent at a moderate constant rate and processed; the worker's CPU per
//      event over each 10k events of its life (a fresh worker's first events cost more);
//   2. capture alone: the workers paused (SIGSTOP), capture as fast as it goes: the rate the
//      ingest tier acknowledges; then the workers resumed and the backlog drained;
//   3. pipeline: capture as fast as it goes with the workers running: the rate events come out
//      of PROCESSED meanwhile, ÷ (2) is the end-to-end ratio;
//   4. paced: constant offered rates at fractions of (2); lag (PROCESSED arrival − send time) and
//      each process's CPU per event from /proc while the pipeline keeps pace (steady state).
// Lag and counts come from an ordered consumer on PROCESSED that reads each event's send time
// from its bytes (bench/lib/processed-reader.ts).
import hdr from 'hdr-histogram-js';
import type { NatsConnection } from '../../lib/index.js';
import { runClosedLoop, type ClosedLoopResult } from '../lib/closed-loop.js';
import { MixBodies } from '../lib/mix-bodies.js';
import { runPaced } from '../lib/paced-load.js';
import { readProcessed, type ProcessedReader } from '../lib/processed-reader.js';
import { roleCpuSeconds } from '../lib/processes.js';

export interface PipelineTarget {
  captureUrl: string;
  nc: NatsConnection;
  key: string;
  projectId: number;
  /** The cluster's processes; their CPU is read from /proc by role (ingest, nats, worker, postgres, admin). */
  processes: readonly { role: string; pid: number }[];
  /** Stops the workers from doing anything (SIGSTOP) and lets them go on (SIGCONT). */
  pauseWorkers(): void;
  resumeWorkers(): void;
}

export interface PipelineOptions {
  durationS: number;
  /** Fractions of the capture-alone rate offered at a constant rate (default [0.5]). */
  fractions?: readonly number[];
  /** Events sent and processed before anything is measured (default 100,000). */
  warmUpEvents?: number;
  /** Their rate (default 5,000 events/s; 0: as fast as capture takes them). */
  warmUpRate?: number;
  perRequest?: number;
  connections?: number;
  /** Known persons of the mix (default 20,000). */
  persons?: number;
  /** Longest wait for a backlog to be processed (default 180 s). */
  drainTimeoutS?: number;
  log: (m: string) => void;
  signal?: AbortSignal;
}

/** CPU µs per event by role, and `pipeline` = ingest + nats + worker + postgres; `load` = this process (load generator and PROCESSED reader). */
export type CpuPerEvent = Record<string, number>;

export interface FlatOutPhase {
  /** Events of requests answered 2xx per second. */
  capturedPerSec: number;
  /** Events read from PROCESSED per second while capture ran (NaN with the workers paused). */
  processedPerSec: number;
  captureP99Ms: number;
  errors: number;
  cpu: CpuPerEvent;
}

export interface PacedPhase {
  fraction: number;
  offeredEventsPerSec: number;
  sentEvents: number;
  processedEvents: number;
  processedPerSec: number;
  /** Processed as fast as offered (≥ 90%): the lag stayed bounded. */
  keptPace: boolean;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  /**
   * From the phase's first request until every event of it came out of PROCESSED, ÷ its events:
   * what processing them cost each process, whether or not the pipeline kept pace.
   */
  cpu: CpuPerEvent;
}

export interface PipelineResult {
  warmUp: { events: number; seconds: number; workerUsPer10k: number[] };
  captureAlone: FlatOutPhase;
  running: FlatOutPhase;
  /** running.processedPerSec ÷ captureAlone.capturedPerSec. */
  ratio: number;
  paced: PacedPhase[];
  mix: Record<string, number>;
  perRequest: number;
}

const PIPELINE_ROLES = ['ingest', 'nats', 'worker', 'postgres'];

/** CPU seconds of every role and of this process, now. */
function cpuNow(processes: PipelineTarget['processes']): Record<string, number> {
  const { user, system } = process.cpuUsage();
  return { ...roleCpuSeconds(processes), load: (user + system) / 1e6 };
}

function perEvent(before: Record<string, number>, after: Record<string, number>, events: number): CpuPerEvent {
  const out: CpuPerEvent = {};
  for (const role of Object.keys(after)) out[role] = events > 0 ? ((after[role]! - (before[role] ?? 0)) / events) * 1e6 : Number.NaN;
  out.pipeline = PIPELINE_ROLES.reduce((sum, r) => sum + (out[r] ?? 0), 0);
  return out;
}

const histogram = () => hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000, numberOfSignificantValueDigits: 3 });

/** Events sent between `fromMs` and `toMs` (send times), as they come out of PROCESSED. */
interface Window {
  fromMs: number;
  toMs: number;
  processed: number;
  lastMs: number;
  lag: hdr.Histogram;
}

/**
 * The phases of the measurement over one cluster, each usable on its own (compare-pipeline.ts
 * runs paced phases of two clusters in turn). Open with `PipelineSession.open`, end with `close`.
 */
export class PipelineSession {
  private readonly windows = new Set<Window>();
  /** Events of 2xx answers so far: the reader has them all once the pipeline caught up. */
  private acknowledged = 0;
  private reader!: ProcessedReader;
  readonly bodies: MixBodies;
  readonly perRequest: number;
  private readonly connections: number;

  private constructor(
    private readonly t: PipelineTarget,
    private readonly o: Omit<PipelineOptions, 'durationS' | 'fractions' | 'warmUpEvents'>,
  ) {
    this.perRequest = o.perRequest ?? 1000;
    this.connections = o.connections ?? 16;
    this.bodies = new MixBodies(t.key, { perRequest: this.perRequest, persons: o.persons });
  }

  static async open(t: PipelineTarget, o: Omit<PipelineOptions, 'durationS' | 'fractions' | 'warmUpEvents'>): Promise<PipelineSession> {
    const session = new PipelineSession(t, o);
    session.reader = await readProcessed(t.nc, t.projectId, (sent, arrived) => {
      for (const w of session.windows) {
        if (sent < w.fromMs || sent > w.toMs) continue;
        w.processed++;
        w.lastMs = arrived;
        w.lag.recordValue(Math.max(1, arrived - sent));
      }
    });
    return session;
  }

  close(): Promise<void> {
    return this.reader.stop();
  }

  private async flatOut(what: string, limit: { durationS: number } | { requests: number }): Promise<ClosedLoopResult> {
    this.o.signal?.throwIfAborted();
    this.o.log(`e2e pipeline: ${what}`);
    const result = await runClosedLoop({ url: this.t.captureUrl, path: '/batch/', body: () => this.bodies.next(), connections: this.connections, signal: this.o.signal, ...limit });
    this.acknowledged += result.ok * this.perRequest;
    if (result.errors > 0) this.o.log(`e2e pipeline: ${result.errors} of ${result.requests} requests not answered 2xx`);
    return result;
  }

  /** Until every acknowledged event was read from PROCESSED and nothing more came for a second. */
  async drain(what: string): Promise<void> {
    const timeoutS = this.o.drainTimeoutS ?? 180;
    const until = Date.now() + timeoutS * 1000;
    while (this.reader.count < this.acknowledged || Date.now() - this.reader.lastAt < 1000) {
      this.o.signal?.throwIfAborted();
      if (Date.now() > until) throw new Error(`${what}: ${this.acknowledged - this.reader.count} acknowledged events not processed after ${timeoutS} s`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /**
   * Sends `events` at `eventsPerSec` (as fast as capture takes them without it) and waits until
   * they are processed; the worker's CPU per event over each 10k. Paced, batches stay small and
   * the events processed follow the CPU spent closely: a worker draining a backlog flat out takes
   * 10k events per shard at once, and 10k windows moved ±50% with where its commits fell.
   */
  async warmUp(events: number, eventsPerSec?: number): Promise<PipelineResult['warmUp']> {
    const started = Date.now();
    const samples: { processed: number; worker: number }[] = [];
    const base = this.reader.count;
    const sample = () => samples.push({ processed: this.reader.count - base, worker: roleCpuSeconds(this.t.processes).worker ?? 0 });
    sample();
    const sampler = setInterval(sample, 100);
    try {
      if (eventsPerSec === undefined) {
        await this.flatOut(`warm-up (${events.toLocaleString('en-US')} events)`, { requests: Math.ceil(events / this.perRequest) });
      } else {
        this.o.log(`e2e pipeline: warm-up (${events.toLocaleString('en-US')} events at ${eventsPerSec.toLocaleString('en-US')} events/s)`);
        const r = await runPaced({ url: this.t.captureUrl, path: '/batch/', body: () => this.bodies.next(), ratePerSec: eventsPerSec / this.perRequest, durationS: events / eventsPerSec, connections: this.connections, signal: this.o.signal });
        this.acknowledged += r.okWithWarmup * this.perRequest;
      }
      await this.drain('warm-up');
    } finally {
      clearInterval(sampler);
    }
    sample();
    const workerUsPer10k: number[] = [];
    const workerAt = (n: number) => samples.find((s) => s.processed >= n)?.worker;
    for (let from = 0; from + 10_000 <= samples.at(-1)!.processed; from += 10_000) {
      const a = workerAt(from);
      const b = workerAt(from + 10_000);
      if (a !== undefined && b !== undefined) workerUsPer10k.push(((b - a) / 10_000) * 1e6);
    }
    this.o.log(`e2e pipeline: warm-up done, worker µs/event per 10k: ${workerUsPer10k.map((x) => x.toFixed(1)).join(' ')}`);
    return { events: this.reader.count - base, seconds: (Date.now() - started) / 1000, workerUsPer10k };
  }

  /** The workers paused, capture as fast as it goes; then the backlog drained. */
  async captureAlone(durationS: number): Promise<FlatOutPhase> {
    this.t.pauseWorkers();
    let phase: FlatOutPhase;
    try {
      const before = cpuNow(this.t.processes);
      const r = await this.flatOut('capture alone (workers paused)', { durationS });
      const events = r.ok * this.perRequest;
      phase = { capturedPerSec: events / r.seconds, processedPerSec: Number.NaN, captureP99Ms: r.p99, errors: r.errors, cpu: perEvent(before, cpuNow(this.t.processes), events) };
    } finally {
      this.t.resumeWorkers();
    }
    this.o.log(`e2e pipeline: capture alone ${Math.round(phase.capturedPerSec)} events/s; draining the backlog`);
    await this.drain('capture alone');
    return phase;
  }

  /** Capture as fast as it goes with the workers running: how fast events come out of PROCESSED meanwhile. */
  async running(durationS: number): Promise<FlatOutPhase> {
    const before = cpuNow(this.t.processes);
    const countBefore = this.reader.count;
    const r = await this.flatOut('capture and workers running', { durationS });
    const processed = this.reader.count - countBefore;
    const phase: FlatOutPhase = {
      capturedPerSec: (r.ok * this.perRequest) / r.seconds,
      processedPerSec: processed / r.seconds,
      captureP99Ms: r.p99,
      errors: r.errors,
      // Per event processed: with capture ahead of the workers, that is what the pipeline delivered.
      cpu: perEvent(before, cpuNow(this.t.processes), processed),
    };
    this.o.log(`e2e pipeline: running: captured ${Math.round(phase.capturedPerSec)}, processed ${Math.round(phase.processedPerSec)} events/s; draining`);
    await this.drain('capture and workers running');
    return phase;
  }

  /** A constant offered rate for `durationS` after 2 s at that rate: lag and CPU per event. */
  async paced(eventsPerSec: number, durationS: number, fraction = Number.NaN): Promise<PacedPhase> {
    this.o.signal?.throwIfAborted();
    this.o.log(`e2e pipeline: ${Number.isFinite(fraction) ? `${Math.round(fraction * 100)}% of capture alone, ` : ''}${Math.round(eventsPerSec)} events/s`);
    const w: Window = { fromMs: Number.POSITIVE_INFINITY, toMs: Number.POSITIVE_INFINITY, processed: 0, lastMs: 0, lag: histogram() };
    this.windows.add(w);
    await this.drain('the phase before');
    const before = cpuNow(this.t.processes);
    try {
      const result = await runPaced({
        url: this.t.captureUrl,
        path: '/batch/',
        body: () => this.bodies.next(),
        ratePerSec: Math.max(0.5, eventsPerSec / this.perRequest),
        durationS,
        warmupS: 2,
        connections: this.connections,
        signal: this.o.signal,
        onMeasuring: () => {
          w.fromMs = Date.now();
        },
      });
      w.toMs = Date.now();
      this.acknowledged += result.okWithWarmup * this.perRequest;
      const sent = result.ok * this.perRequest;
      await this.drain(`${Math.round(eventsPerSec)} events/s`).catch((err: unknown) => this.o.log(String(err)));
      // Until the last of them is processed (the drain ends a quiet second later: ~1% more).
      const after = cpuNow(this.t.processes);
      const processedPerSec = w.processed / Math.max(0.001, (w.lastMs - w.fromMs) / 1000);
      const phase: PacedPhase = {
        fraction,
        offeredEventsPerSec: eventsPerSec,
        sentEvents: sent,
        processedEvents: w.processed,
        processedPerSec,
        keptPace: processedPerSec >= 0.9 * eventsPerSec && w.processed >= sent,
        p50: w.lag.getValueAtPercentile(50),
        p90: w.lag.getValueAtPercentile(90),
        p99: w.lag.getValueAtPercentile(99),
        max: w.lag.maxValue,
        cpu: perEvent(before, after, result.okWithWarmup * this.perRequest),
      };
      this.o.log(`e2e pipeline: lag p50 ${phase.p50} ms, p99 ${phase.p99} ms; pipeline CPU ${phase.cpu.pipeline!.toFixed(1)} µs/event`);
      return phase;
    } finally {
      this.windows.delete(w);
    }
  }
}

/** The stage: warm-up, capture alone, capture with the workers running, then the paced fractions. */
export async function measurePipeline(t: PipelineTarget, o: PipelineOptions): Promise<PipelineResult> {
  const session = await PipelineSession.open(t, o);
  try {
    const rate = o.warmUpRate ?? 5_000;
    const warmUp = await session.warmUp(o.warmUpEvents ?? 100_000, rate > 0 ? rate : undefined);
    const captureAlone = await session.captureAlone(o.durationS);
    const running = await session.running(o.durationS);
    const paced: PacedPhase[] = [];
    for (const fraction of o.fractions ?? [0.5]) paced.push(await session.paced(captureAlone.capturedPerSec * fraction, o.durationS, fraction));
    return { warmUp, captureAlone, running, ratio: running.processedPerSec / captureAlone.capturedPerSec, paced, mix: session.bodies.mix, perRequest: session.perRequest };
  } finally {
    await session.close();
  }
}
