// The message shapes shared by the event loop and the parse threads (nothing else is shared).
import type { CaptureErrorCode } from '../errors.js';
import type { ParseLimits, RequestMeta } from '../parse/index.js';
import type { ParsedWire } from './parsed-wire.js';

export interface ParseTask {
  body: ArrayBuffer;
  byteOffset: number;
  byteLength: number;
  meta: RequestMeta;
  limits: ParseLimits;
  registryVersion: number;
  /** Bytes the request already holds in the budget (one request alone may pass the budget). */
  heldByRequest: number;
  /** One BigInt64: bytes this task took from the shared budget; the event loop gives them back. */
  reserved: SharedArrayBuffer;
}

export type ParseTaskResult =
  | { ok: true; parsed: ParsedWire }
  | { ok: false; code: CaptureErrorCode; detail: string; attr: string | null; headers: Readonly<Record<string, string>> };

/** What each parse thread is started with. */
export interface ParseThreadData {
  registryChannel: string;
  /** The node's in-flight budget (inflight-budget.ts): its shared count and its limit. */
  budget: SharedArrayBuffer;
  budgetLimit: number;
  /** Retry-After of the 503s a thread answers itself (RETRY_AFTER_SECONDS). */
  retryAfterSeconds: number;
}
