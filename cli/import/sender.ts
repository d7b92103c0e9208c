// One POST of a batch to capture, and what its answer means for the importer:
//   ok        2xx: every event is stored
//   retry     503/429/5xx/408 or a network error: send the same batch again later
//   rejected  400/413/422: something in the batch will never be accepted — split it to find what
//   fatal     any other 4xx (401 bad key, 404 wrong URL, …): no batch can succeed
import { promisify } from 'node:util';
import { gzip as gzipCallback } from 'node:zlib';

const gzip = promisify(gzipCallback);

export type SendOutcome =
  | { kind: 'ok' }
  | { kind: 'retry'; reason: string; retryAfterMs: number | undefined }
  | { kind: 'rejected'; reason: string }
  | { kind: 'fatal'; reason: string };

export interface SendOptions {
  timeoutMs: number;
  gzip: boolean;
  /** Aborts the request at once (hard stop). */
  signal: AbortSignal;
}

const REJECTED = new Set([400, 413, 422]);

/** `{code, detail}` of a capture error body, as one readable reason. */
function describe(status: number, text: string): string {
  try {
    const body = JSON.parse(text) as { code?: unknown; detail?: unknown };
    if (typeof body.code === 'string') return `${status} ${body.code}${typeof body.detail === 'string' ? `: ${body.detail}` : ''}`;
  } catch {
    // not JSON: fall through to the raw text
  }
  const snippet = text.trim().slice(0, 200);
  return snippet ? `${status}: ${snippet}` : `HTTP ${status}`;
}

function retryAfter(header: string | null): number | undefined {
  if (!header) return undefined;
  const seconds = Number(header);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(header);
  return Number.isFinite(date) ? Math.max(0, date - Date.now()) : undefined;
}

export async function postBatch(url: string, body: Buffer, options: SendOptions): Promise<SendOutcome> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  let payload = body;
  if (options.gzip) {
    payload = await gzip(body, { level: 1 });
    headers['content-encoding'] = 'gzip';
  }
  let response: Response;
  try {
    response = await fetch(url, {
      method: 'POST',
      body: payload,
      headers,
      signal: AbortSignal.any([options.signal, AbortSignal.timeout(options.timeoutMs)]),
    });
  } catch (err) {
    if (options.signal.aborted) throw err;
    const e = err as Error & { cause?: { code?: string; message?: string } };
    const reason = e.name === 'TimeoutError' ? `no answer within ${options.timeoutMs / 1000}s` : (e.cause?.code ?? e.cause?.message ?? e.message);
    return { kind: 'retry', reason: `network: ${reason}`, retryAfterMs: undefined };
  }
  let text: string;
  try {
    text = await response.text();
  } catch (err) {
    if (options.signal.aborted) throw err;
    return { kind: 'retry', reason: `network: answer cut short (${(err as Error).message})`, retryAfterMs: undefined };
  }
  const status = response.status;
  if (status >= 200 && status < 300) return { kind: 'ok' };
  const reason = describe(status, text);
  if (status === 408 || status === 429 || status >= 500) return { kind: 'retry', reason, retryAfterMs: retryAfter(response.headers.get('retry-after')) };
  if (REJECTED.has(status)) return { kind: 'rejected', reason };
  return { kind: 'fatal', reason };
}

/** Exponential backoff with jitter: ~250 ms, 500 ms, 1 s, … capped at 30 s; never below Retry-After. */
export function backoffMs(attempt: number, retryAfterMs: number | undefined, random = Math.random): number {
  const base = Math.min(30_000, 250 * 2 ** Math.max(0, attempt - 1));
  const jittered = base / 2 + random() * (base / 2);
  return Math.max(jittered, retryAfterMs ?? 0);
}
