// Checks one record before it is sent. Capture answers 200 while silently dropping an event
// without a name or distinct_id (spec, Errors 2–4), and turns a bad timestamp into "now" and a
// bad uuid into a random one: fine for SDKs, data loss or duplicates in a migration. So the
// importer refuses such records itself and reports them by line. The distinct_id rules are
// capture's own (ingest/parse/normalize-event.ts; a test checks they agree), because lanes — and so
// per-distinct_id order — key on the id as capture will store it.
// Size is not judged here: what a cluster takes for one event depends on its settings
// (PUBLISH_MAX_MESSAGE_BYTES, the NATS server's max_payload, MAX_BODY_BYTES), and capture's 413
// for a record is found by splitting its batch and reported by line like these.
import { isPlainObject, isUuid } from '../../lib/index.js';

const MAX_DISTINCT_ID_LENGTH = 200;

export type Validated =
  | { ok: true; distinctId: string; hasUuid: boolean }
  | { ok: false; reason: string };

/** distinct_id as capture derives it: undefined when absent, '' when empty. */
export function captureDistinctId(raw: Record<string, unknown>): string | undefined {
  const properties = isPlainObject(raw.properties) ? raw.properties : {};
  let value = raw.distinct_id;
  if (value === undefined || value === null) value = raw.$distinct_id;
  if (value === undefined || value === null) value = properties.distinct_id;
  if (value === undefined || value === null) return undefined;
  let id = typeof value === 'string' ? value : JSON.stringify(value);
  if (id.includes('\0')) id = id.replace(/\0/g, '\ufffd');
  if (id.length > MAX_DISTINCT_ID_LENGTH) {
    let cut = '';
    let count = 0;
    for (const ch of id) {
      if (count++ === MAX_DISTINCT_ID_LENGTH) break;
      cut += ch;
    }
    id = cut;
  }
  return id;
}

export function validateRecord(text: string): Validated {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    return { ok: false, reason: `not valid JSON (${(err as Error).message})` };
  }
  if (!isPlainObject(raw)) return { ok: false, reason: 'not a JSON object' };
  const name = raw.event;
  if (name === undefined || name === null) return { ok: false, reason: 'no `event` name' };
  if (typeof name !== 'string' || name.length === 0) return { ok: false, reason: '`event` must be a non-empty string' };
  if (name === '$performance_event') return { ok: false, reason: 'capture ignores $performance_event events' };
  if (raw.properties !== undefined && raw.properties !== null && !isPlainObject(raw.properties)) {
    return { ok: false, reason: '`properties` must be an object' };
  }
  const distinctId = captureDistinctId(raw);
  if (distinctId === undefined) return { ok: false, reason: 'no distinct_id (nor $distinct_id or properties.distinct_id)' };
  if (distinctId.length === 0) return { ok: false, reason: 'distinct_id is empty' };
  const hasUuid = raw.uuid !== undefined;
  if (hasUuid && !isUuid(raw.uuid)) return { ok: false, reason: '`uuid` must be a UUID string' };
  if (raw.timestamp !== undefined && raw.timestamp !== null) {
    if (typeof raw.timestamp !== 'string' || !Number.isFinite(Date.parse(raw.timestamp))) {
      return { ok: false, reason: '`timestamp` must be an ISO 8601 date string' };
    }
  }
  return { ok: true, distinctId, hasUuid };
}
