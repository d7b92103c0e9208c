// Open-loop load at a constant rate: request i is due at start + i/rate whatever happened to the
// requests before it, it is sent when due (the generator wakes for each due time, so requests
// are spread over the second, at millisecond granularity), and its latency is measured from when
// it was due, so a server that falls behind shows it in the percentiles (no coordinated
// omission). autocannon's -R is not used for this: each of its connections sends its whole
// per-second quota in one burst at every second tick, and its omission correction assumes a 1 ms
// interval, which inflates every percentile.
//
// How late the generator itself sent requests is reported apart (sendLag*): when it is large the
// load generator, not the server, was short of CPU.
import hdr from 'hdr-histogram-js';
import { Pool } from 'undici';

export interface PacedOptions {
  url: string;
  path: string;
  /** A fixed body, or a function making each request's body (fresh uuids, send times). */
  body: string | (() => string);
  ratePerSec: number;
  durationS: number;
  connections: number;
  /** Seconds of load at the same rate before measuring (connections opened, caches warm); default 0. */
  warmupS?: number;
  /** Stops sending; requests in flight are still awaited. */
  signal?: AbortSignal;
  /** Called as the first measured request is sent (after the warm-up). */
  onMeasuring?: () => void;
}

export interface PacedResult {
  /** Requests sent after the warm-up. */
  sent: number;
  /** Of those, answered 2xx (only these are in the latency percentiles). */
  ok: number;
  /** Answered 2xx, the warm-up's requests included. */
  okWithWarmup: number;
  /** Answered 503 `overloaded`: the server refusing work it has no room for, by design (isBusy). */
  busy: number;
  /** Anything else: other statuses, connection errors. */
  errors: number;
  /** 2xx answers per second over the measured window. */
  achievedPerSec: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
  /** How late the generator sent requests after they were due, ms. */
  sendLagP50: number;
  sendLagP99: number;
  sendLagMax: number;
}

/** A latency histogram in microseconds (up to 10 minutes). */
export const microseconds = () => hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 600_000_000, numberOfSignificantValueDigits: 3 });

/** A percentile of a microsecond histogram in milliseconds; NaN when it recorded nothing. */
export function percentileMs(h: hdr.Histogram, p: number): number {
  return h.totalCount > 0 ? h.getValueAtPercentile(p) / 1000 : Number.NaN;
}

/**
 * The ingest node refusing a body its in-flight byte budget has no room for (503 `overloaded`,
 * by design under 20 MB bodies); every other 503 (not ready, a failed publish) is an error.
 */
export function isBusy(status: number, body: string): boolean {
  return status === 503 && body.includes('"overloaded"');
}

export async function runPaced(o: PacedOptions): Promise<PacedResult> {
  const pool = new Pool(o.url, { connections: o.connections, pipelining: 1, keepAliveTimeout: 30_000 });
  const latency = microseconds();
  const sendLag = microseconds();
  const intervalMs = 1000 / o.ratePerSec;
  const warmupCount = Math.round((o.warmupS ?? 0) * o.ratePerSec);
  const total = warmupCount + Math.max(1, Math.round(o.durationS * o.ratePerSec));
  let sent = 0;
  let ok = 0;
  let okWithWarmup = 0;
  let busy = 0;
  let errors = 0;
  const inflight = new Set<Promise<void>>();
  const fire = (dueAt: number, measured: boolean) => {
    const body = typeof o.body === 'string' ? o.body : o.body();
    if (measured) {
      sent++;
      sendLag.recordValue(Math.max(1, Math.round((performance.now() - dueAt) * 1000)));
    }
    const p = pool
      .request({ method: 'POST', path: o.path, body, headers: { 'content-type': 'application/json' } })
      .then(async (res) => {
        const text = res.statusCode === 503 ? await res.body.text() : (await res.body.dump(), '');
        if (res.statusCode >= 200 && res.statusCode < 300) okWithWarmup++;
        if (!measured) return;
        if (res.statusCode >= 200 && res.statusCode < 300) {
          ok++;
          latency.recordValue(Math.max(1, Math.round((performance.now() - dueAt) * 1000)));
        } else if (isBusy(res.statusCode, text)) busy++;
        else errors++;
      })
      .catch(() => {
        if (measured) errors++;
      })
      .finally(() => inflight.delete(p));
    inflight.add(p);
  };

  const start = performance.now();
  const measureFrom = start + warmupCount * intervalMs;
  let next = 0;
  while (next < total && !o.signal?.aborted) {
    // Everything due by now goes out now (request `next` is due at start + next × interval).
    const now = performance.now();
    while (next < total && start + next * intervalMs <= now) {
      if (next === warmupCount) o.onMeasuring?.();
      fire(start + next * intervalMs, next >= warmupCount);
      next++;
    }
    if (next >= total) break;
    // Sleep until the next request is due; timers fire at millisecond granularity at best.
    const wait = start + next * intervalMs - performance.now();
    await new Promise((r) => setTimeout(r, Math.max(0, wait)));
  }
  await Promise.all(inflight);
  const seconds = Math.max(0.001, (performance.now() - measureFrom) / 1000);
  await pool.close();
  return {
    sent,
    ok,
    okWithWarmup,
    busy,
    errors,
    achievedPerSec: ok / seconds,
    p50: percentileMs(latency, 50),
    p90: percentileMs(latency, 90),
    p99: percentileMs(latency, 99),
    p999: percentileMs(latency, 99.9),
    max: latency.totalCount > 0 ? latency.maxValue / 1000 : Number.NaN,
    sendLagP50: percentileMs(sendLag, 50),
    sendLagP99: percentileMs(sendLag, 99),
    sendLagMax: sendLag.totalCount > 0 ? sendLag.maxValue / 1000 : Number.NaN,
  };
}
