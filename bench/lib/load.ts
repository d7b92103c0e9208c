// Load generation with autocannon: fixed duration, keep-alive connections, no pipelining
// (uWS closes a connection that pipelines a request before the previous answer is written,
// and capture answers only after JetStream acknowledged; no PostHog SDK pipelines).
import autocannon from 'autocannon';

export interface LoadOptions {
  url: string;
  body: string | Buffer;
  eventsPerRequest: number;
  connections: number;
  durationS: number;
  headers?: Record<string, string>;
  /** Offered rate in requests/s for the whole run (autocannon -R); unset = as fast as possible. */
  overallRate?: number;
}

export interface LoadResult {
  requests: number;
  ok: number;
  reqPerSec: number;
  eventsPerSec: number;
  /** Request body megabytes (10^6) per second that got a 2xx. */
  mbPerSec: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  errors: number;
  non2xx: number;
}

export async function runLoad(o: LoadOptions): Promise<LoadResult> {
  const result = await autocannon({
    url: o.url,
    method: 'POST',
    body: o.body,
    headers: { 'content-type': 'application/json', ...o.headers },
    connections: o.connections,
    pipelining: 1,
    duration: o.durationS,
    overallRate: o.overallRate,
    timeout: 60,
  });
  const ok = result['2xx'];
  const seconds = result.duration;
  const bodyBytes = Buffer.byteLength(o.body);
  return {
    requests: result.requests.total,
    ok,
    reqPerSec: ok / seconds,
    eventsPerSec: (ok * o.eventsPerRequest) / seconds,
    mbPerSec: (ok * bodyBytes) / seconds / 1e6,
    p50: result.latency.p50,
    p90: result.latency.p90,
    p99: result.latency.p99,
    p999: result.latency.p99_9,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
  };
}
