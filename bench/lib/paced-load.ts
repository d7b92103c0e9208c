// Open-loop load at a constant rate: request i is due at start + i/rate whatever happened to the
// requests before it, and its latency is measured from when it was due, so a server that falls
// behind shows it in the percentiles (no coordinated omission). autocannon's -R is not used for
// this: each of its connections sends its whole per-second quota in one burst at every second
// tick, and its omission correction assumes a 1 ms interval, which inflates every percentile.
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
}

export interface PacedResult {
  sent: number;
  ok: number;
  errors: number;
  achievedPerSec: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
}

export async function runPaced(o: PacedOptions): Promise<PacedResult> {
  const pool = new Pool(o.url, { connections: o.connections, pipelining: 1, keepAliveTimeout: 30_000 });
  const histogram = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 600_000_000, numberOfSignificantValueDigits: 3 }); // µs
  let sent = 0;
  let ok = 0;
  let errors = 0;
  const inflight = new Set<Promise<void>>();
  const start = performance.now();
  const end = start + o.durationS * 1000;
  const fire = (dueAt: number) => {
    const body = typeof o.body === 'string' ? o.body : o.body();
    const p = pool
      .request({ method: 'POST', path: o.path, body, headers: { 'content-type': 'application/json' } })
      .then(async (res) => {
        await res.body.dump();
        histogram.recordValue(Math.max(1, Math.round((performance.now() - dueAt) * 1000)));
        if (res.statusCode >= 200 && res.statusCode < 300) ok++;
        else errors++;
      })
      .catch(() => {
        errors++;
      })
      .finally(() => inflight.delete(p));
    inflight.add(p);
  };
  for (;;) {
    const now = performance.now();
    if (now >= end) break;
    const due = Math.floor(((now - start) / 1000) * o.ratePerSec);
    while (sent < due) fire(start + (sent++ * 1000) / o.ratePerSec);
    await new Promise((r) => setTimeout(r, 1));
  }
  await Promise.all(inflight);
  const seconds = (performance.now() - start) / 1000;
  await pool.close();
  const ms = (p: number) => histogram.getValueAtPercentile(p) / 1000;
  return { sent, ok, errors, achievedPerSec: ok / seconds, p50: ms(50), p90: ms(90), p99: ms(99), p999: ms(99.9), max: histogram.maxValue / 1000 };
}
