// The records a run delivers (docs/exports.md, "Records"): built from PROCESSED lines and the
// time each line's message was stored (its arrival), in one fixed key order, with timestamps as
// Python's isoformat() writes them, so a rerun produces the same bytes and PostHog users see the
// shapes they know.
import { isPlainObject, parseNdjson, type ProcessedEvent } from '../../lib/index.js';

/** An event as S3, PostgreSQL and HTTP receive it. */
export interface ExportRecord {
  uuid: string;
  event: string;
  properties: Record<string, unknown>;
  distinct_id: string;
  team_id: number;
  /** Microseconds since the epoch (UTC). */
  timestampUs: number;
  person_id: string | null;
  elements_chain: string;
  set: Record<string, unknown> | null;
  set_once: Record<string, unknown> | null;
  /** When PROCESSED stored the event (its arrival), microseconds since the epoch: `created_at` and `_inserted_at`. */
  insertedAtUs: number;
  /** PROCESSED stream sequence of the message that carried it. */
  seq: number;
}

/** A person as the persons model delivers it: one row per distinct id (PostHog's persons model). */
export interface PersonRecord {
  team_id: number;
  distinct_id: string;
  person_id: string;
  properties: Record<string, unknown>;
  person_version: number;
  person_distinct_id_version: number;
  /** Microseconds since the epoch. */
  createdAtUs: number;
  is_deleted: boolean;
  /** When the person or its distinct id last changed, microseconds since the epoch. */
  insertedAtUs: number;
}

/** The record of one PROCESSED line; undefined for a line that is not an event (left out, counted by the caller). */
export function exportRecordOf(line: unknown, insertedAtUs: number, seq: number): ExportRecord | undefined {
  if (!isPlainObject(line)) return undefined;
  const e = line as Partial<ProcessedEvent>;
  if (typeof e.uuid !== 'string' || typeof e.event !== 'string' || typeof e.distinct_id !== 'string') return undefined;
  const properties = isPlainObject(e.properties) ? e.properties : {};
  const ms = typeof e.timestamp === 'string' ? Date.parse(e.timestamp) : Number.NaN;
  return {
    uuid: e.uuid,
    event: e.event,
    properties,
    distinct_id: e.distinct_id,
    team_id: typeof e.project_id === 'number' ? e.project_id : 0,
    // A line without a valid timestamp gets its arrival: every record has one.
    timestampUs: Number.isFinite(ms) ? ms * 1000 : insertedAtUs,
    person_id: typeof e.person_id === 'string' ? e.person_id : null,
    elements_chain: typeof properties.$elements_chain === 'string' ? properties.$elements_chain : '',
    set: isPlainObject(properties.$set) ? properties.$set : null,
    set_once: isPlainObject(properties.$set_once) ? properties.$set_once : null,
    insertedAtUs,
    seq,
  };
}

// The text of each whole second written lately ("2024-01-01T00:00:00"): the events of a message share
// their arrival and timestamps come in runs, so a line's two times (timestamp, created_at) mostly hit
// seconds already written, where Date's toISOString costs about 1 µs each. Emptied when it fills.
const secondTexts = new Map<number, string>();
const SECOND_TEXTS_MAX = 4_096;

function secondText(second: number): string {
  let head = secondTexts.get(second);
  if (head === undefined) {
    if (secondTexts.size >= SECOND_TEXTS_MAX) secondTexts.clear();
    head = new Date(second * 1000).toISOString().slice(0, 19);
    secondTexts.set(second, head);
  }
  return head;
}

/** `2024-01-01T00:00:00.123456+00:00` (Python's isoformat of a UTC datetime with microseconds; no fraction when it is zero). */
export function pythonIsoUs(us: number): string {
  const micros = ((us % 1_000_000) + 1_000_000) % 1_000_000;
  const head = secondText((us - micros) / 1_000_000);
  return micros === 0 ? `${head}+00:00` : `${head}.${String(micros + 1_000_000).slice(1)}+00:00`;
}

/** Python's isoformat of an interval bound (whole seconds): `2024-01-01T00:00:00+00:00`. */
export function pythonIso(date: Date): string {
  return pythonIsoUs(date.getTime() * 1000);
}

/** One JSONLines line of an event (S3): fixed key order, nested JSON objects, ISO timestamps. */
export function eventJsonLine(r: ExportRecord): string {
  const inserted = pythonIsoUs(r.insertedAtUs);
  return (
    `{"uuid":${JSON.stringify(r.uuid)},"event":${JSON.stringify(r.event)},"properties":${JSON.stringify(r.properties)},` +
    `"distinct_id":${JSON.stringify(r.distinct_id)},"team_id":${r.team_id},"timestamp":"${pythonIsoUs(r.timestampUs)}",` +
    `"person_id":${r.person_id === null ? 'null' : JSON.stringify(r.person_id)},"elements_chain":${JSON.stringify(r.elements_chain)},` +
    `"set":${JSON.stringify(r.set)},"set_once":${JSON.stringify(r.set_once)},"created_at":"${inserted}","_inserted_at":"${inserted}"}\n`
  );
}

/** One JSONLines line of a person (S3). */
export function personJsonLine(r: PersonRecord): string {
  return (
    `{"team_id":${r.team_id},"distinct_id":${JSON.stringify(r.distinct_id)},"person_id":${JSON.stringify(r.person_id)},` +
    `"properties":${JSON.stringify(r.properties)},"person_version":${r.person_version},` +
    `"person_distinct_id_version":${r.person_distinct_id_version},"created_at":"${pythonIsoUs(r.createdAtUs)}",` +
    `"is_deleted":${r.is_deleted},"_inserted_at":"${pythonIsoUs(r.insertedAtUs)}"}\n`
  );
}

/** include_events / exclude_events of a destination config, as a predicate on the event name. */
export function eventFilter(config: Record<string, unknown>): (event: string) => boolean {
  const list = (v: unknown) => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);
  const include = new Set(list(config.include_events));
  const exclude = new Set(list(config.exclude_events));
  if (include.size === 0 && exclude.size === 0) return () => true;
  return (event) => (include.size === 0 || include.has(event)) && !exclude.has(event);
}

/** The lines of a PROCESSED message, parsed; a line that is not JSON is left out (one bad line must not hide the others). */
export function processedLines(data: Uint8Array): unknown[] {
  try {
    return parseNdjson(data);
  } catch {
    const lines: unknown[] = [];
    for (const text of new TextDecoder().decode(data).split('\n')) {
      if (!text) continue;
      try {
        lines.push(JSON.parse(text));
      } catch {
        // Not JSON: not an event.
      }
    }
    return lines;
  }
}
