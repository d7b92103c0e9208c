// Closed-loop load: each connection sends its next request as soon as the last one is answered,
// until the time is up or the requests are sent; then every request in flight is awaited, so the
// count of 2xx answers is exact (autocannon abandons the requests in flight at its deadline, and
// their events, stored all the same, would be counted by nobody).
import { Pool } from 'undici';
import { microseconds, percentileMs } from './paced-load.js';

export interface ClosedLoopOptions {
  url: string;
  path: string;
  body: () => string;
  connections: number;
  /** Stop sending after this long, or after `requests` requests, whichever comes first. */
  durationS?: number;
  requests?: number;
  signal?: AbortSignal;
}

export interface ClosedLoopResult {
  requests: number;
  ok: number;
  /** Everything else: other statuses, connection errors. */
  errors: number;
  /** From the first request sent to the last answer. */
  seconds: number;
  p50: number;
  p99: number;
}

export async function runClosedLoop(o: ClosedLoopOptions): Promise<ClosedLoopResult> {
  const pool = new Pool(o.url, { connections: o.connections, pipelining: 1, keepAliveTimeout: 30_000, headersTimeout: 60_000, bodyTimeout: 60_000 });
  const latency = microseconds();
  const start = performance.now();
  const until = o.durationS === undefined ? Number.POSITIVE_INFINITY : start + o.durationS * 1000;
  const limit = o.requests ?? Number.POSITIVE_INFINITY;
  let requests = 0;
  let ok = 0;
  let errors = 0;
  const connection = async () => {
    while (requests < limit && performance.now() < until && !o.signal?.aborted) {
      requests++;
      const sentAt = performance.now();
      try {
        const res = await pool.request({ method: 'POST', path: o.path, body: o.body(), headers: { 'content-type': 'application/json' } });
        await res.body.dump();
        if (res.statusCode >= 200 && res.statusCode < 300) {
          ok++;
          latency.recordValue(Math.max(1, Math.round((performance.now() - sentAt) * 1000)));
        } else errors++;
      } catch {
        errors++;
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: o.connections }, connection));
  } finally {
    await pool.close();
  }
  return { requests, ok, errors, seconds: (performance.now() - start) / 1000, p50: percentileMs(latency, 50), p99: percentileMs(latency, 99) };
}
