// The pure core of capture: request bytes + facts about the request → events ready to publish
// (NDJSON bytes grouped into per-shard segments), or a CaptureError. Runs in a piscina thread
// for large bodies and inline for small ones; it touches no socket, no NATS, no clock.
import type { ProjectRecord } from '../../lib/index.js';
import { decodePayload } from './decode.js';
import { CaptureError } from '../errors.js';
import { LinePacker, type PackedLines } from './line-packer.js';
import { normalizeEvent, type DropReason, type EventContext } from './normalize-event.js';
import { DEFAULT_MAX_EVENTS } from './envelope-scanner.js';
import { DEFAULT_MAX_NESTING_DEPTH } from './nesting-depth.js';
import { readEnvelope, SCAN_MIN_BYTES, type RawEvent } from './read-envelope.js';
import { eventJson } from './sanitize.js';
import { resolveToken } from './token.js';


export type RouteKind = 'capture' | 'batch' | 'e' | 'i' | 'track' | 'engage';

/** Routes whose decoded payload may be base64 once more (older posthog-js). */
const LEGACY_ROUTES: ReadonlySet<RouteKind> = new Set(['capture', 'e', 'track', 'engage']);

export interface RequestMeta {
  route: RouteKind;
  /** Raw query string, without `?`. */
  query: string;
  contentType: string;
  contentEncoding: string;
  ip: string | undefined;
  nowMs: number;
}

export interface ParseLimits {
  maxDecompressedBytes: number;
  /** MAX_NESTING_DEPTH (default DEFAULT_MAX_NESTING_DEPTH): deeper payloads are invalid_event. */
  maxNestingDepth?: number;
  /** MAX_EVENTS_PER_REQUEST (default DEFAULT_MAX_EVENTS): more is 413 too_many_events. */
  maxEventsPerRequest?: number;
  maxMessageBytes: number;
  shardCount: number;
}

export type TokenLookup = (token: string) => ProjectRecord | undefined;

/** Where the events of a request go: NDJSON lines in one buffer, cut into per-shard segments. */
export interface ParsedRequest extends PackedLines {
  token: string;
  projectId: number;
  historical: boolean;
  accepted: number;
  dropped: Partial<Record<DropReason, number>>;
}

const SENT_AT_MIN_MS = Date.UTC(2021, 0, 1);

/** Bytes of each line that depend on the request rather than the event: `,"sent_at":"…"` and `,"ip":"…"`. */
function varyingBytes(ctx: EventContext): number {
  return (ctx.sentAtIso === undefined ? 0 : ctx.sentAtIso.length + 13) + (ctx.ip === undefined ? 0 : ctx.ip.length + 8);
}

// Many requests share a millisecond: format `now` once per millisecond.
let lastIsoMs = Number.NaN;
let lastIso = '';
function isoOf(ms: number): string {
  if (ms !== lastIsoMs) {
    lastIsoMs = ms;
    lastIso = new Date(ms).toISOString();
  }
  return lastIso;
}

function sentAtOf(bodySentAt: unknown, query: URLSearchParams): number | undefined {
  if (typeof bodySentAt === 'string' && bodySentAt.length > 0) {
    const ms = Date.parse(bodySentAt);
    if (Number.isFinite(ms)) return ms;
  }
  // `_` is milliseconds; a value from 2020 or before was sent in seconds and is ignored.
  const underscore = query.get('_');
  if (underscore && /^\d+$/.test(underscore)) {
    const ms = Number(underscore);
    if (ms >= SENT_AT_MIN_MS) return ms;
  }
  return undefined;
}

export interface ParseOptions {
  /** Output in a dedicated ArrayBuffer that can be transferred to another thread. */
  transferable: boolean;
  /** Takes bytes from the node's in-flight budget before decoded or output bytes are allocated. */
  reserve?: (bytes: number) => boolean;
  /** Gives back bytes taken with `reserve` that were not needed after all. */
  unreserve?: (bytes: number) => void;
}

export function parseCaptureRequest(
  body: Uint8Array,
  meta: RequestMeta,
  limits: ParseLimits,
  lookup: TokenLookup,
  options: ParseOptions = { transferable: true },
): ParsedRequest {
  const query = new URLSearchParams(meta.query);
  const payload = decodePayload({
    body,
    query,
    contentType: meta.contentType,
    contentEncoding: meta.contentEncoding,
    legacyPath: LEGACY_ROUTES.has(meta.route),
    maxDecompressedBytes: limits.maxDecompressedBytes,
    reserve: options.reserve,
    unreserve: options.unreserve,
  });
  const envelope = readEnvelope(payload, SCAN_MIN_BYTES, limits.maxNestingDepth ?? DEFAULT_MAX_NESTING_DEPTH, limits.maxEventsPerRequest ?? DEFAULT_MAX_EVENTS);
  if (envelope.count === 0) throw new CaptureError('empty_batch');

  // With a batch-level key, events are parsed one at a time below; otherwise every event's own
  // key is needed first, so they are all parsed now.
  let eventAt = (i: number) => envelope.event(i);
  let token: string;
  if (envelope.batchToken !== undefined && envelope.batchToken !== null) {
    token = resolveToken(envelope.batchToken, []);
  } else {
    const all: RawEvent[] = [];
    for (let i = 0; i < envelope.count; i++) all.push(envelope.event(i));
    token = resolveToken(undefined, all);
    eventAt = (i) => all[i]!;
  }
  const project = lookup(token);
  if (!project) throw new CaptureError('unknown_api_key');

  const sentAtMs = sentAtOf(envelope.sentAt, query);
  const ctx: EventContext = {
    token,
    projectId: project.projectId,
    nowMs: meta.nowMs,
    nowIso: isoOf(meta.nowMs),
    sentAtMs,
    sentAtIso: sentAtMs === undefined ? undefined : new Date(sentAtMs).toISOString(),
    ip: meta.ip,
  };

  const dropped: Partial<Record<DropReason, number>> = {};
  // Output ≈ input plus ~250 bytes per event of added fields (uuid, now, token, …).
  const capacityHint = payload.length + envelope.count * 256;
  // Historical messages are never merged with other requests', so their ids can come from their
  // events (line-packer.ts): an importer or client sending a batch again stores nothing twice.
  const messageIdSalt = envelope.historical ? `historical.${project.projectId}` : undefined;
  const packer = new LinePacker(
    limits.shardCount,
    limits.maxMessageBytes,
    !envelope.historical,
    options.transferable,
    capacityHint,
    messageIdSalt,
    varyingBytes(ctx),
    options.reserve,
  );
  for (let i = 0; i < envelope.count; i++) {
    const raw = eventAt(i);
    if (meta.route === 'engage' && raw.event === undefined) raw.event = '$identify';
    const result = normalizeEvent(raw, ctx);
    if (typeof result === 'string') dropped[result] = (dropped[result] ?? 0) + 1;
    else packer.add(result.distinct_id, eventJson(result), result.uuid);
  }
  return {
    token,
    projectId: project.projectId,
    historical: envelope.historical,
    accepted: packer.count,
    dropped,
    ...packer.pack(),
  };
}
