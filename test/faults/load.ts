import { isUuid } from '../../lib/index.js';

// A steady, bounded load of capture and batch requests, as SDKs send them: every event has its
// own uuid, and a request that fails (5xx, network error) is retried with the same body, as
// the SDKs do. It records which uuids were acknowledged (got a 2xx) and which were only sent.

export interface LoadStats {
  requests: number;
  retries: number;
  sent: Set<string>;
  acknowledged: Set<string>;
  /** Requests that never got a 2xx within their retries. */
  failedRequests: number;
}

export interface LoadOptions {
  captureUrl: string;
  apiKey: string;
  /** Requests in flight at once. */
  concurrency: number;
  /** Stop starting requests after this many milliseconds. */
  durationMs: number;
  /** Distinct ids cycle through this many users. */
  users: number;
  /** Retries of a failed request (with backoff) before giving up on it. */
  retries: number;
  label: string;
  /** Events per /batch/ request (default 20). */
  batchSize?: number;
  /** About a third of the requests single-event /capture/ (default true). */
  singles?: boolean;
}

let sequence = 0;

function uuid(label: string): string {
  // Unique per process run and readable when debugging: 8-4-4-4-12 hex, the label in front.
  // (It must be a valid uuid: capture replaces an invalid one with its own.)
  const n = (sequence++).toString(16).padStart(12, '0');
  const tag = Buffer.from(label.padEnd(4, '_').slice(0, 4)).toString('hex');
  const id = `${tag}-0000-4000-8000-${n}`;
  if (!isUuid(id)) throw new Error(`not a uuid: ${String(id)}`);
  return id;
}

function event(label: string, i: number, users: number): { uuid: string; body: Record<string, unknown> } {
  const id = uuid(label);
  return { uuid: id, body: { uuid: id, event: 'fault test', distinct_id: `fault-user-${i % users}`, properties: { label, i } } };
}

async function send(o: LoadOptions, path: string, body: string): Promise<boolean> {
  try {
    const res = await fetch(`${o.captureUrl}${path}`, { method: 'POST', body, headers: { 'content-type': 'application/json' }, signal: AbortSignal.timeout(15_000) });
    await res.arrayBuffer();
    return res.status >= 200 && res.status < 300;
  } catch {
    return false;
  }
}

export async function runLoad(o: LoadOptions, stats: LoadStats = newStats()): Promise<LoadStats> {
  const deadline = Date.now() + o.durationMs;
  let i = 0;
  const worker = async () => {
    while (Date.now() < deadline) {
      const single = (o.singles ?? true) && i % 3 === 0; // about a third single captures, the rest batches
      const batchSize = single ? 1 : (o.batchSize ?? 20);
      const events = Array.from({ length: batchSize }, () => event(o.label, i++, o.users));
      const [path, body] =
        single
          ? ['/capture/', JSON.stringify({ api_key: o.apiKey, ...events[0]!.body })]
          : ['/batch/', JSON.stringify({ api_key: o.apiKey, batch: events.map((e) => e.body) })];
      for (const e of events) stats.sent.add(e.uuid);
      let ok = false;
      for (let attempt = 0; attempt <= o.retries && !ok; attempt++) {
        if (attempt > 0) {
          stats.retries++;
          await new Promise((r) => setTimeout(r, Math.min(2_000, 100 * 2 ** attempt)));
        }
        stats.requests++;
        ok = await send(o, path, body);
      }
      if (ok) for (const e of events) stats.acknowledged.add(e.uuid);
      else stats.failedRequests++;
      await new Promise((r) => setTimeout(r, 10)); // steady, not flat out
    }
  };
  await Promise.all(Array.from({ length: o.concurrency }, worker));
  return stats;
}

export function newStats(): LoadStats {
  return { requests: 0, retries: 0, sent: new Set(), acknowledged: new Set(), failedRequests: 0 };
}
