// Small helpers around uWS responses: status lines, CORS, corked JSON answers, and reading a
// request body into one buffer under a byte limit. uWS rules: a response must get onAborted
// before any asynchronous work, must never be touched after abort, and writes that happen
// outside the handler's own tick must be corked.
import type { HttpResponse } from './uws.js';

const STATUS_TEXT: Record<number, string> = {
  200: '200 OK',
  204: '204 No Content',
  400: '400 Bad Request',
  401: '401 Unauthorized',
  404: '404 Not Found',
  405: '405 Method Not Allowed',
  413: '413 Payload Too Large',
  500: '500 Internal Server Error',
  503: '503 Service Unavailable',
};

export function statusLine(status: number): string {
  return STATUS_TEXT[status] ?? `${status} Status`;
}

/** Per-request facts read while uWS still lets us read the request. */
export interface ResponseState {
  aborted: boolean;
  /** The request's Origin header, mirrored for CORS. */
  origin: string;
}

export interface Answer {
  status: number;
  body?: string;
  headers?: Readonly<Record<string, string>>;
  contentType?: string;
  closeConnection?: boolean;
}

export function respond(res: HttpResponse, state: ResponseState, answer: Answer): void {
  if (state.aborted) return;
  res.cork(() => {
    res.writeStatus(statusLine(answer.status));
    if (state.origin) {
      res.writeHeader('Access-Control-Allow-Origin', state.origin);
      res.writeHeader('Access-Control-Allow-Credentials', 'true');
      res.writeHeader('Vary', 'Origin');
    }
    if (answer.headers) for (const k in answer.headers) res.writeHeader(k, answer.headers[k]!);
    if (answer.status === 204) {
      res.endWithoutBody(0, answer.closeConnection);
      return;
    }
    res.writeHeader('Content-Type', answer.contentType ?? 'application/json');
    res.end(answer.body ?? '', answer.closeConnection);
  });
  state.aborted = true; // answered: nothing may touch `res` again
}

export interface BodyLimits {
  maxBytes: number;
}

export type BodyOutcome =
  | { kind: 'complete'; body: Uint8Array }
  | { kind: 'too_large'; received: number }
  | { kind: 'over_budget' };

/**
 * Reads the body into one dedicated buffer (transferable to a thread). With a Content-Length the
 * buffer is allocated once; without, chunks are collected. Stops as soon as the limit is passed.
 * `reserve(n)` asks the node's in-flight budget for n more bytes (false → the caller answers 503).
 */
export function readBody(
  res: HttpResponse,
  contentLength: number | undefined,
  limits: BodyLimits,
  reserve: (bytes: number) => boolean,
  done: (outcome: BodyOutcome) => void,
): void {
  let finished = false;
  const finish = (outcome: BodyOutcome) => {
    if (finished) return;
    finished = true;
    done(outcome);
  };
  if (contentLength !== undefined) {
    if (!reserve(contentLength)) return finish({ kind: 'over_budget' });
    // Small bodies come from Node's pool (cheap); large ones get their own ArrayBuffer so the
    // parse pool can take them without a copy.
    const buffer = contentLength < 64 * 1024 ? Buffer.allocUnsafe(contentLength) : Buffer.allocUnsafeSlow(contentLength);
    let offset = 0;
    if (contentLength === 0) return finish({ kind: 'complete', body: buffer });
    res.onData((chunk, isLast) => {
      if (finished) return;
      const bytes = new Uint8Array(chunk);
      if (offset + bytes.length > contentLength) return finish({ kind: 'too_large', received: offset + bytes.length });
      buffer.set(bytes, offset); // uWS reuses `chunk` after this callback returns: copy now
      offset += bytes.length;
      if (isLast) finish({ kind: 'complete', body: offset === contentLength ? buffer : buffer.subarray(0, offset) });
    });
    return;
  }
  const chunks: Buffer[] = [];
  let total = 0;
  res.onData((chunk, isLast) => {
    if (finished) return;
    total += chunk.byteLength;
    if (total > limits.maxBytes) return finish({ kind: 'too_large', received: total });
    if (!reserve(chunk.byteLength)) return finish({ kind: 'over_budget' });
    chunks.push(Buffer.from(new Uint8Array(chunk))); // copies: the chunk is only valid during this call
    if (isLast) {
      const body = Buffer.allocUnsafeSlow(total);
      let offset = 0;
      for (const c of chunks) offset += c.copy(body, offset);
      finish({ kind: 'complete', body });
    }
  });
}
