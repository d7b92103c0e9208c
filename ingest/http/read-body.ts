// Reads a request body into one buffer under a byte limit, taking its bytes from the node's
// in-flight budget.
import type { Exchange } from './exchange.js';

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
  res: Exchange,
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
      const bytes = chunk;
      if (offset + bytes.length > contentLength) return finish({ kind: 'too_large', received: offset + bytes.length });
      buffer.set(bytes, offset);
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
    chunks.push(chunk);
    if (isLast) {
      const body = Buffer.allocUnsafeSlow(total);
      let offset = 0;
      for (const c of chunks) offset += c.copy(body, offset);
      finish({ kind: 'complete', body });
    }
  });
}
