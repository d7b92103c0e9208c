// Scenario: end-to-end lag, capture → PROCESSED, under a constant offered rate. Every event
// carries a fresh uuid and its send time (properties.$bench_sent_ms); an ordered consumer on
// PROCESSED (`processed.<projectId>.<shard>`, NDJSON lines carrying the captured event's
// properties) takes the difference when the processed line arrives. First the pipeline's
// maximum is measured (capture as fast as it goes; processed events per second until caught
// up), then the lag at fractions of it. Needs workers: runs only when a worker entry point exists.
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { DeliverPolicy, jetstream } from '@nats-io/jetstream';
import autocannon from 'autocannon';
import hdr from 'hdr-histogram-js';
import { parseNdjson, STREAMS, type NatsConnection, type ProcessedEvent } from '../../lib/index.js';
import { runPaced } from '../lib/paced-load.js';
import { benchEvent } from '../lib/payloads.js';

/** Whether workers exist in this checkout (source, or built next to this file). */
export function workersAvailable(): boolean {
  const candidates = ['../../workers/main.ts', '../../workers/main.js'].map((p) => fileURLToPath(new URL(p, import.meta.url)));
  return candidates.some((p) => existsSync(p));
}

export interface LagPoint {
  /** Fraction of the measured maximum offered; 1 = as fast as capture takes them. */
  fraction: number;
  offeredEventsPerSec: number;
  /** Events of requests answered 2xx while the load ran. */
  sentEvents: number;
  /** Events processed (also from requests still in flight when the load stopped). */
  processedEvents: number;
  /** Processed events per second, from the first send until the last of them was processed. */
  processedPerSec: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

export interface LagOptions {
  captureUrl: string;
  nc: NatsConnection;
  key: string;
  projectId: number;
  durationS: number;
  fractions: readonly number[];
  /** Events per /batch/ request (default 100). */
  eventsPerRequest?: number;
  connections?: number;
  /** How long to wait for the last events of a phase to be processed (default 60 s). */
  drainTimeoutS?: number;
  /**
   * Events sent as fast as capture takes them, and processed, before anything is measured; not
   * counted (default 0). Fresh workers are slow for their first ~200k events each (JIT, heap and
   * person cache growing): without a warm-up the measured maximum is a cold start's.
   */
  warmUpEvents?: number;
  log: (m: string) => void;
}

interface Phase {
  id: string;
  sent: number;
  processed: number;
  firstSentMs: number;
  lastProcessedMs: number;
  histogram: hdr.Histogram;
}

/** Bodies with fresh uuids and the send time, made per request by autocannon. */
function bodyFactory(key: string, phase: string, perRequest: number) {
  let i = 0;
  return () => {
    const sentMs = Date.now();
    const batch = Array.from({ length: perRequest }, () => {
      const e = benchEvent(i++);
      return { ...e, uuid: randomUUID(), properties: { ...e.properties, $bench_sent_ms: sentMs, $bench_phase: phase } };
    });
    return JSON.stringify({ api_key: key, batch });
  };
}

/**
 * Sends one request as large as the phases' until it is answered 2xx: the first phase must not
 * include the capture node loading its parse thread (bodies this large are parsed in a thread, small
 * ones inline). The first such request took 1.0–1.6 s in the test harness, longer than a 1 s phase.
 */
async function warmUp(captureUrl: string, body: string, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  let last = 'no answer';
  while (Date.now() < until) {
    const res = await fetch(new URL('/batch/', captureUrl), { method: 'POST', headers: { 'content-type': 'application/json' }, body }).catch(
      (err: unknown) => err as Error,
    );
    if (!(res instanceof Error) && res.ok) return;
    last = res instanceof Error ? res.message : `${res.status} ${await res.text()}`;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`capture did not answer 2xx within ${timeoutMs} ms: ${last}`);
}

export async function measureEndToEndLag(o: LagOptions): Promise<LagPoint[]> {
  const perRequest = o.eventsPerRequest ?? 100;
  const connections = o.connections ?? 16;
  const phases = new Map<string, Phase>();
  const consumer = await jetstream(o.nc).consumers.get(STREAMS.processed, { filter_subjects: `processed.${o.projectId}.>`, deliver_policy: DeliverPolicy.New });
  const messages = await consumer.consume();
  const reading = (async () => {
    for await (const m of messages) {
      const now = Date.now();
      for (const e of parseNdjson<ProcessedEvent>(m.data)) {
        const phase = phases.get(e.properties.$bench_phase as string);
        const sent = e.properties.$bench_sent_ms;
        if (!phase || typeof sent !== 'number') continue;
        phase.processed++;
        phase.lastProcessedMs = now;
        phase.histogram.recordValue(Math.max(0, now - sent));
      }
    }
  })();

  /** `requests`: a closed-loop phase of that many requests instead of durationS (the warm-up). */
  const runPhase = async (fraction: number, rateEventsPerSec: number | undefined, requests?: number): Promise<LagPoint> => {
    const id = randomUUID();
    const phase: Phase = { id, sent: 0, processed: 0, firstSentMs: Date.now(), lastProcessedMs: 0, histogram: hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000, numberOfSignificantValueDigits: 3 }) };
    phases.set(id, phase);
    const makeBody = bodyFactory(o.key, id, perRequest);
    const what = requests !== undefined ? `warm-up (${requests * perRequest} events)` : rateEventsPerSec === undefined ? 'at maximum' : `at ${Math.round(fraction * 100)}% (${Math.round(rateEventsPerSec)} events/s)`;
    o.log(`e2e lag ${what}`);
    if (rateEventsPerSec === undefined) {
      // As fast as capture takes them (closed loop).
      const result = await autocannon({
        url: o.captureUrl,
        connections,
        pipelining: 1,
        ...(requests !== undefined ? { amount: requests } : { duration: o.durationS }),
        timeout: 60,
        requests: [{ method: 'POST', path: '/batch/', headers: { 'content-type': 'application/json' }, setupRequest: (req) => ({ ...req, body: makeBody() }) }],
      });
      phase.sent = result['2xx'] * perRequest;
    } else {
      const result = await runPaced({ url: o.captureUrl, path: '/batch/', body: makeBody, ratePerSec: Math.max(1, rateEventsPerSec / perRequest), durationS: o.durationS, connections });
      phase.sent = result.ok * perRequest;
    }
    // Requests still in flight when the load stopped may be stored too: wait until everything
    // acknowledged is processed and nothing more arrives for a second.
    // A warm-up's backlog is drained by workers still in their slow start: give it longer.
    const drainUntil = Date.now() + (o.drainTimeoutS ?? 60) * (requests !== undefined ? 3 : 1) * 1000;
    while (Date.now() < drainUntil && (phase.processed < phase.sent || Date.now() - phase.lastProcessedMs < 1000)) await new Promise((r) => setTimeout(r, 100));
    const h = phase.histogram;
    const seconds = Math.max(0.001, (phase.lastProcessedMs - phase.firstSentMs) / 1000);
    return {
      fraction,
      offeredEventsPerSec: rateEventsPerSec ?? Number.NaN,
      sentEvents: phase.sent,
      processedEvents: phase.processed,
      processedPerSec: phase.processed / seconds,
      p50: h.getValueAtPercentile(50),
      p90: h.getValueAtPercentile(90),
      p99: h.getValueAtPercentile(99),
      max: h.maxValue,
    };
  };

  try {
    // Its events belong to no phase: the reader counts none of them.
    await warmUp(o.captureUrl, bodyFactory(o.key, 'warm-up', perRequest)(), (o.drainTimeoutS ?? 60) * 1000);
    if (o.warmUpEvents) {
      const warm = await runPhase(1, undefined, Math.ceil(o.warmUpEvents / perRequest));
      o.log(`e2e lag warm-up: ${warm.processedEvents} of ${warm.sentEvents} events processed, ${Math.round(warm.processedPerSec)} events/s`);
      // A backlog left behind would slow the maximum phase down and lengthen its lags.
      if (warm.processedEvents < warm.sentEvents) throw new Error(`the warm-up was not processed in time: ${warm.processedEvents} of ${warm.sentEvents} events`);
    }
    const max = await runPhase(1, undefined);
    const points = [max];
    for (const fraction of o.fractions) points.push(await runPhase(fraction, max.processedPerSec * fraction));
    return points;
  } finally {
    await messages.close();
    await reading.catch(() => undefined);
  }
}
