// Load generation with autocannon: fixed duration, keep-alive connections, no pipelining
// (the same as SDKs: pipelined requests are answered, but one at a time per connection,
// so pipelining would measure little more than queueing; no PostHog SDK pipelines).
//
// Only 2xx answers count: throughput, MB/s and the latency percentiles are of 2xx answers (a
// 503 is answered fast and would flatter the percentiles). A 503 `overloaded` is the ingest
// node's in-flight budget refusing a body it has no room for, by design (16 clients × 20 MB);
// it is counted as `busy`, apart from real failures (`errors`, any other 503 included).
import autocannon from 'autocannon';
import { isBusy, microseconds, percentileMs } from './paced-load.js';

export interface LoadOptions {
  url: string;
  body: string | Buffer;
  eventsPerRequest: number;
  connections: number;
  durationS: number;
  headers?: Record<string, string>;
  /** Stops the load early (the result covers what was measured so far). */
  signal?: AbortSignal;
}

export interface LoadResult {
  requests: number;
  /** Answers 2xx: every figure below except busy/errors is of these only. */
  ok: number;
  reqPerSec: number;
  eventsPerSec: number;
  /** Request body megabytes (10^6) per second that got a 2xx. */
  mbPerSec: number;
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  /** 503 `overloaded`: refused for lack of room in the in-flight budget, by design (isBusy). */
  busy: number;
  /** Everything else that was not 2xx: other statuses, connection errors, timeouts. */
  errors: number;
}

export async function runLoad(o: LoadOptions): Promise<LoadResult> {
  const latency = microseconds();
  let busy = 0;
  let stop: () => void = () => undefined;
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: o.url,
        method: 'POST',
        body: o.body,
        headers: { 'content-type': 'application/json', ...o.headers },
        connections: o.connections,
        pipelining: 1,
        duration: o.durationS,
        timeout: 60,
        // Method, body and headers come from the defaults above; this only sees each answer.
        requests: [
          {
            onResponse: (status, body) => {
              if (isBusy(status, body)) busy++;
            },
          },
        ],
      },
      (err, r) => (err ? reject(err as Error) : resolve(r)),
    );
    // autocannon's own percentiles are whole milliseconds; these are microseconds (2xx only, as its).
    instance.on('response', (_client, status, _bytes, ms) => {
      if (status >= 200 && status < 300) latency.recordValue(Math.max(1, Math.round(ms * 1000)));
    });
    stop = () => instance.stop();
    o.signal?.addEventListener('abort', stop, { once: true });
  }).finally(() => o.signal?.removeEventListener('abort', stop));
  const ok = result['2xx'];
  const seconds = Math.max(0.001, result.duration);
  const bodyBytes = Buffer.byteLength(o.body);
  const ms = (p: number) => percentileMs(latency, p);
  return {
    requests: result.requests.total,
    ok,
    reqPerSec: ok / seconds,
    eventsPerSec: (ok * o.eventsPerRequest) / seconds,
    mbPerSec: (ok * bodyBytes) / seconds / 1e6,
    p50: ms(50),
    p90: ms(90),
    p99: ms(99),
    p999: ms(99.9),
    busy,
    // autocannon's errors already include its timeouts.
    errors: result.errors + Math.max(0, result.non2xx - busy),
  };
}
