// One raw SDK event → one captured event line, or the reason it is dropped. Rules follow
// reference/posthog-capture.md §4; the spec decides drops (no name / no or empty distinct_id:
// not ingested, request still 200).
import { isPlainObject, isUuid, uuidv7, type CapturedEvent, type Properties } from '../../lib/index.js';

export const DROP_REASONS = ['missing_event_name', 'missing_distinct_id', 'empty_distinct_id', 'performance_event'] as const;
export type DropReason = (typeof DROP_REASONS)[number];

export interface EventContext {
  token: string;
  projectId: number;
  nowMs: number;
  nowIso: string;
  /** Client send time (body `sent_at` or query `_`), ms since epoch. */
  sentAtMs: number | undefined;
  sentAtIso: string | undefined;
  ip: string | undefined;
}

const MAX_DISTINCT_ID_LENGTH = 200;
const FUTURE_TOLERANCE_MS = 23 * 3600 * 1000;
const MIN_MS = Date.parse('0000-01-01T00:00:00Z');
const MAX_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);

type RawEvent = Record<string, unknown>;

/** distinct_id from the top level, `$distinct_id`, or properties; stringified, NUL-free, ≤ 200 chars. */
export function extractDistinctId(raw: RawEvent, properties: Properties): string | null | undefined {
  let value = raw.distinct_id;
  if (value === undefined || value === null) value = raw.$distinct_id;
  if (value === undefined || value === null) value = properties.distinct_id;
  if (value === undefined || value === null) return undefined;
  let id = typeof value === 'string' ? value : JSON.stringify(value);
  if (id.includes('\0')) id = id.replace(/\0/g, '\ufffd');
  if (id.length === 0) return null;
  if (id.length > MAX_DISTINCT_ID_LENGTH) id = truncateCodePoints(id, MAX_DISTINCT_ID_LENGTH);
  return id;
}

/** Cuts to `max` characters without splitting a surrogate pair. */
function truncateCodePoints(text: string, max: number): string {
  let out = '';
  let count = 0;
  for (const ch of text) {
    if (count === max) break;
    out += ch;
    count++;
  }
  return out;
}

function parseTime(value: unknown): number | undefined {
  if (typeof value !== 'string' || value.length === 0) return undefined;
  const ms = Date.parse(value);
  return Number.isFinite(ms) ? ms : undefined;
}

/**
 * The event's time corrected for client clock skew: `now − offset` when an offset is given,
 * else `now + (timestamp − sent_at)` (unless `$ignore_sent_at`), else the timestamp, else now.
 * More than 23 h in the future → now; a year outside 0–9999 → the epoch.
 */
export function correctedTimestamp(raw: RawEvent, properties: Properties, ctx: EventContext, timestamp = parseTime(raw.timestamp)): number {
  let ms: number;
  const offset = raw.offset;
  if (typeof offset === 'number' && Number.isFinite(offset)) {
    ms = ctx.nowMs - offset;
  } else if (timestamp !== undefined) {
    const ignoreSentAt = properties.$ignore_sent_at === true;
    ms = ctx.sentAtMs !== undefined && !ignoreSentAt ? ctx.nowMs + (timestamp - ctx.sentAtMs) : timestamp;
  } else {
    ms = ctx.nowMs;
  }
  if (ms > ctx.nowMs + FUTURE_TOLERANCE_MS) return ctx.nowMs;
  if (ms < MIN_MS || ms > MAX_MS) return 0;
  return ms;
}

const CANONICAL_ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

/**
 * `ms` as ISO 8601; the client's own string when it already is exactly that (saves a format).
 * `clientMs` is Date.parse of that string, done once for the correction as well.
 */
function isoTimestamp(clientTimestamp: unknown, clientMs: number | undefined, ms: number): string {
  if (clientMs === ms && typeof clientTimestamp === 'string' && clientTimestamp.length === 24 && CANONICAL_ISO.test(clientTimestamp)) return clientTimestamp;
  return new Date(ms).toISOString();
}

export function normalizeEvent(raw: RawEvent, ctx: EventContext): CapturedEvent | DropReason {
  const name = raw.event;
  if (typeof name !== 'string' || name.length === 0) return 'missing_event_name';
  if (name === '$performance_event') return 'performance_event';
  const properties: Properties = isPlainObject(raw.properties) ? raw.properties : {};
  const distinctId = extractDistinctId(raw, properties);
  if (distinctId === undefined) return 'missing_distinct_id';
  if (distinctId === null) return 'empty_distinct_id';

  const clientMs = parseTime(raw.timestamp);
  const event: CapturedEvent = {
    uuid: isUuid(raw.uuid) ? raw.uuid.toLowerCase() : uuidv7(ctx.nowMs),
    event: name,
    distinct_id: distinctId,
    properties,
    timestamp: isoTimestamp(raw.timestamp, clientMs, correctedTimestamp(raw, properties, ctx, clientMs)),
    now: ctx.nowIso,
    token: ctx.token,
    project_id: ctx.projectId,
  };
  if (ctx.sentAtIso !== undefined) event.sent_at = ctx.sentAtIso;
  if (ctx.ip !== undefined) event.ip = ctx.ip;
  if (isPlainObject(raw.$set)) event.$set = raw.$set;
  if (isPlainObject(raw.$set_once)) event.$set_once = raw.$set_once;
  return event;
}
