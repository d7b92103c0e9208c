// Reads a request body into one buffer under a byte limit, taking its bytes from the node's
// in-flight budget as they arrive: a request that declares 20 MiB and sends nothing holds
// nothing (its wait is bounded by BODY_TIMEOUT, at the connection).
import type { Exchange } from './exchange.js';

export interface BodyLimits {
  maxBytes: number;
}

export type BodyOutcome =
  | { kind: 'complete'; body: Uint8Array }
  | { kind: 'too_large'; received: number }
  | { kind: 'over_budget' };

/** Bodies up to this size get their whole buffer at once; larger ones grow it as bytes arrive. */
const FIRST_BUFFER_BYTES = 1024 * 1024;

/**
 * Reads the body into one dedicated buffer (transferable to a thread). Stops as soon as the limit
 * is passed. `reserve(n)` asks the node's in-flight budget for n more bytes as they arrive
 * (false → the caller answers 503).
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
  if (contentLength === 0) return finish({ kind: 'complete', body: Buffer.alloc(0) });
  // With a Content-Length, the buffer is sized for it (small bodies from Node's pool, which is
  // cheap; large ones in their own ArrayBuffer, so the parse pool takes them without a copy),
  // but a large one only as far as bytes came: it doubles, up to the declared length.
  const expected = contentLength ?? 0;
  const firstBuffer = () =>
    contentLength === undefined ? Buffer.allocUnsafeSlow(64 * 1024) : expected < 64 * 1024 ? Buffer.allocUnsafe(expected) : Buffer.allocUnsafeSlow(Math.min(expected, FIRST_BUFFER_BYTES));
  let buffer: Buffer | undefined;
  let offset = 0;
  res.onData((chunk, isLast) => {
    if (finished) return;
    const end = offset + chunk.length;
    if (end > (contentLength ?? limits.maxBytes)) return finish({ kind: 'too_large', received: end });
    if (chunk.length > 0 && !reserve(chunk.length)) return finish({ kind: 'over_budget' });
    if (buffer === undefined) {
      // The whole body in one chunk that owns its memory (Node's parser copies each chunk into a
      // buffer of its own): it is the body, with no copy (and it can go to a parse thread as is).
      if (chunk.length === contentLength && chunk.byteOffset === 0 && chunk.buffer.byteLength === chunk.length) {
        buffer = chunk;
        offset = end;
        if (isLast) finish({ kind: 'complete', body: buffer });
        return;
      }
      buffer = firstBuffer();
    }
    if (end > buffer.length) {
      const bigger = Buffer.allocUnsafeSlow(Math.min(Math.max(end, buffer.length * 2), contentLength ?? limits.maxBytes));
      buffer.copy(bigger, 0, 0, offset);
      buffer = bigger;
    }
    buffer.set(chunk, offset);
    offset = end;
    if (isLast) finish({ kind: 'complete', body: offset === buffer.length ? buffer : buffer.subarray(0, offset) });
  });
}
