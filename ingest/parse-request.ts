// The pure core of capture: request bytes + facts about the request → events ready to publish
// (NDJSON bytes grouped into per-shard segments), or a CaptureError. Runs in a piscina thread
// for large bodies and inline for small ones; it touches no socket, no NATS, no clock.
import { shardOf, type CapturedEvent, type ProjectRecord } from '../lib/index.js';
import { decodePayload } from './decode.js';
import { CaptureError } from './errors.js';
import { normalizeEvent, type DropReason, type EventContext } from './normalize-event.js';
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
  maxMessageBytes: number;
  shardCount: number;
}

export type TokenLookup = (token: string) => ProjectRecord | undefined;

/** Where the events of a request go, as byte ranges of one buffer. */
export interface ParsedRequest {
  token: string;
  projectId: number;
  historical: boolean;
  accepted: number;
  dropped: Partial<Record<DropReason, number>>;
  /** Every accepted event as one NDJSON line, grouped by segment. */
  data: Uint8Array;
  /** Per segment: [shard, event count, start byte, end byte]. A segment never exceeds maxMessageBytes. */
  segments: Int32Array;
  /** Per segment, the distinct_id all its events share (realtime only; spike detection uses it). */
  segmentDistinctIds: string[] | null;
}

export const SEGMENT_FIELDS = 4;

interface Envelope {
  events: unknown[];
  batchToken: unknown;
  historical: boolean;
  sentAt: unknown;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The three request shapes: an array of events, `{api_key|token, batch, …}`, or one event. */
function readEnvelope(json: unknown): Envelope {
  if (Array.isArray(json)) return { events: json, batchToken: undefined, historical: false, sentAt: undefined };
  if (!isObject(json)) throw new CaptureError('invalid_payload', 'failed to parse request: expected an event, an array of events or a batch object');
  if ('batch' in json) {
    if (!Array.isArray(json.batch)) throw new CaptureError('invalid_payload', 'failed to parse request: `batch` must be an array of events');
    return {
      events: json.batch,
      batchToken: json.api_key ?? json.token,
      historical: json.historical_migration === true,
      sentAt: json.sent_at,
    };
  }
  return { events: [json], batchToken: undefined, historical: false, sentAt: json.sent_at };
}

const SENT_AT_MIN_MS = Date.UTC(2021, 0, 1);

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
}

export function parseCaptureRequest(
  body: Uint8Array,
  meta: RequestMeta,
  limits: ParseLimits,
  lookup: TokenLookup,
  options: ParseOptions = { transferable: true },
): ParsedRequest {
  const query = new URLSearchParams(meta.query);
  const text = decodePayload({
    body,
    query,
    contentType: meta.contentType,
    contentEncoding: meta.contentEncoding,
    legacyPath: LEGACY_ROUTES.has(meta.route),
    maxDecompressedBytes: limits.maxDecompressedBytes,
  });
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new CaptureError('invalid_json', `failed to parse request: ${(err as Error).message}`, {}, { cause: err });
  }
  const envelope = readEnvelope(json);
  if (envelope.events.length === 0) throw new CaptureError('empty_batch');
  for (const e of envelope.events) {
    if (!isObject(e)) throw new CaptureError('invalid_event', `failed to parse request: every event must be a JSON object, got ${JSON.stringify(e)?.slice(0, 50)}`);
    if (e.properties !== undefined && e.properties !== null && !isObject(e.properties)) {
      throw new CaptureError('invalid_event', 'failed to parse request: `properties` must be an object', { attr: 'properties' });
    }
  }
  const events = envelope.events as Record<string, unknown>[];
  const token = resolveToken(envelope.batchToken, events);
  const project = lookup(token);
  if (!project) throw new CaptureError('unknown_api_key');

  const sentAtMs = sentAtOf(envelope.sentAt, query);
  const ctx: EventContext = {
    token,
    projectId: project.projectId,
    nowMs: meta.nowMs,
    nowIso: new Date(meta.nowMs).toISOString(),
    sentAtMs,
    sentAtIso: sentAtMs === undefined ? undefined : new Date(sentAtMs).toISOString(),
    ip: meta.ip,
  };

  const dropped: Partial<Record<DropReason, number>> = {};
  const accepted: CapturedEvent[] = [];
  for (const raw of events) {
    if (meta.route === 'engage' && raw.event === undefined) raw.event = '$identify';
    const result = normalizeEvent(raw, ctx);
    if (typeof result === 'string') dropped[result] = (dropped[result] ?? 0) + 1;
    else accepted.push(result);
  }

  const packed = packSegments(accepted, limits, !envelope.historical, options.transferable);
  return { token, projectId: project.projectId, historical: envelope.historical, accepted: accepted.length, dropped, ...packed };
}

interface Group {
  shard: number;
  distinctId: string;
  lines: string[];
}

const encoder = new TextEncoder();

/**
 * Serialises events into one buffer, ordered by shard and — for realtime events — by
 * distinct_id within a shard (first appearance first), keeping each distinct_id's events in
 * request order. Each segment is one group cut at line boundaries to fit a message.
 */
function packSegments(
  events: readonly CapturedEvent[],
  limits: ParseLimits,
  perDistinctId: boolean,
  transferable: boolean,
): Pick<ParsedRequest, 'data' | 'segments' | 'segmentDistinctIds'> {
  const groups = new Map<string | number, Group>();
  let chars = 0;
  for (const e of events) {
    const shard = shardOf(e.distinct_id, limits.shardCount);
    const key = perDistinctId ? e.distinct_id : shard;
    let group = groups.get(key);
    if (!group) {
      group = { shard, distinctId: e.distinct_id, lines: [] };
      groups.set(key, group);
    }
    const line = JSON.stringify(e) + '\n';
    chars += line.length;
    group.lines.push(line);
  }
  const ordered = [...groups.values()].sort((a, b) => a.shard - b.shard);

  // Encoded in one pass: JSON is mostly ASCII, so UTF-16 length + 1/8 is nearly always enough;
  // encodeInto reports a short write and the buffer grows. Transferable output needs its own
  // ArrayBuffer, not a slice of Node's shared pool.
  const allocate = (size: number) => (transferable ? Buffer.allocUnsafeSlow(size) : Buffer.allocUnsafe(size));
  let data = allocate(chars + (chars >> 3) + 64);
  const segments: number[] = [];
  const ids: string[] | null = perDistinctId ? [] : null;
  let offset = 0;
  for (const group of ordered) {
    let start = offset;
    let count = 0;
    for (const line of group.lines) {
      let written = encoder.encodeInto(line, data.subarray(offset));
      while (written.read < line.length) {
        const bigger = allocate(data.length * 2 + line.length * 3);
        data.copy(bigger, 0, 0, offset);
        data = bigger;
        written = encoder.encodeInto(line, data.subarray(offset));
      }
      const bytes = written.written;
      if (bytes > limits.maxMessageBytes) {
        throw new CaptureError('event_too_large', `an event is ${bytes} bytes; the largest accepted is ${limits.maxMessageBytes}`);
      }
      if (offset + bytes - start > limits.maxMessageBytes && count > 0) {
        segments.push(group.shard, count, start, offset);
        ids?.push(group.distinctId);
        start = offset;
        count = 0;
      }
      offset += bytes;
      count++;
    }
    segments.push(group.shard, count, start, offset);
    ids?.push(group.distinctId);
  }
  return { data: data.subarray(0, offset), segments: Int32Array.from(segments), segmentDistinctIds: ids };
}
