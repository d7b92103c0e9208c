// The message format on every stream (ARCHITECTURE.md, "JetStream"): a message holds one or
// more events of one subject as newline-delimited JSON, with headers Nats-Msg-Id (unique per
// message, reused on retry) and Spate-Events (the number of lines).

export const HEADER_MSG_ID = 'Nats-Msg-Id';
export const HEADER_EVENT_COUNT = 'Spate-Events';

export type Properties = Record<string, unknown>;

/** A JSON object (not null, not an array): what properties, `$set` and `$groups` must be. */
export function isPlainObject(value: unknown): value is Properties {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** One line of EVENTS, HISTORICAL and OVERFLOW. */
export interface CapturedEvent {
  uuid: string;
  event: string;
  distinct_id: string;
  properties: Properties;
  /** ISO 8601, already corrected for client clock skew. */
  timestamp: string;
  /** ISO 8601 as the client sent it (body `sent_at` or query `_`), when it did. */
  sent_at?: string;
  /** ISO 8601: when the ingest node received the request. */
  now: string;
  ip?: string;
  token: string;
  project_id: number;
  /** Top-level person updates, kept as the client sent them (they win over properties.$set). */
  $set?: Properties;
  $set_once?: Properties;
}

/** One line of PROCESSED. */
export interface ProcessedEvent extends CapturedEvent {
  /** Absent for personless events ($process_person_profile: false). */
  person_id?: string;
}

const NEWLINE = 0x0a;
const decoder = new TextDecoder();

/** Splits an NDJSON message into its parsed lines (blank lines ignored). */
export function parseNdjson<T = unknown>(bytes: Uint8Array): T[] {
  const out: T[] = [];
  let start = 0;
  while (start < bytes.length) {
    let end = bytes.indexOf(NEWLINE, start);
    if (end === -1) end = bytes.length;
    if (end > start) out.push(JSON.parse(decoder.decode(bytes.subarray(start, end))) as T);
    start = end + 1;
  }
  return out;
}

/** Serialises events as NDJSON (each line ends with a newline). */
export function toNdjson(events: readonly unknown[]): string {
  let out = '';
  for (const e of events) out += JSON.stringify(e) + '\n';
  return out;
}
