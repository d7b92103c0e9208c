// Bytes in and out of a batch: source messages → captured events (bad lines become warnings,
// never crashes), and processed lines → PROCESSED messages whose ids depend only on the source
// sequences they cover, so replaying a planned batch republishes the same ids (JetStream drops them).
import { cleanStrings, hasHostileText, isPlainObject, isUuid, parseSubject, PERSON_ID_TAIL, subjectFor, type CapturedEvent, type StreamKind } from '../../lib/index.js';
import { dedupKey } from './dedup.js';
import type { IngestionWarning, SourceEvent } from './process-events.js';

export interface SourceMessage {
  seq: number;
  subject: string;
  data: Uint8Array;
  /** When JetStream stored it (ms since epoch). */
  storedAtMs: number;
}

export interface BatchEvent extends SourceEvent {
  /** Index of the source message in the batch. */
  message: number;
  /**
   * Byte range of the line in its source message (trimmed); undefined when its bytes cannot be
   * reused as they are: checking changed the event, strings had to be cleaned (lib/sanitize.ts),
   * or the bytes were not valid UTF-8.
   */
  span: { start: number; end: number } | undefined;
  /** Where the line starts in its source message: places its output in a part's chunks. */
  offset: number;
  /** `<projectId>:<uuid>` (dedup key). */
  key: string;
  /**
   * Bytes a hook added inside the line's properties object (`"k":v,` at `at` in the source
   * message): properties the event did not have, written out without serialising it again.
   */
  insert?: { at: number; bytes: Buffer };
  /**
   * The line's own bytes once a hook replaced the event (serialised then, to know its size):
   * `span` and `insert` are in these, not in the source message.
   */
  body?: Buffer;
}

export interface ParsedBatch {
  events: BatchEvent[];
  /** Source message index → project id (undefined: not one of our subjects). */
  projects: (number | undefined)[];
  /** Source message index → its bytes (a view, not a copy): processed lines are cut from them. */
  bodies: Buffer[];
  warnings: IngestionWarning[];
  malformed: number;
}

const NEWLINE = 0x0a;
const CLOSE_BRACE = 0x7d;
const isSpace = (byte: number) => byte === 0x20 || byte === 0x09 || byte === 0x0d || byte === 0x0a;

// Lines are found in the bytes (a newline byte never occurs inside a UTF-8 sequence) and decoded
// one by one: their byte ranges let an output line be copied from the source instead of encoded again.
export function parseMessages(kind: StreamKind, messages: readonly SourceMessage[]): ParsedBatch {
  const out: ParsedBatch = { events: [], projects: [], bodies: [], warnings: [], malformed: 0 };
  for (let index = 0; index < messages.length; index++) parseMessage(kind, messages[index]!, index, out);
  return out;
}

// Hot code lives in functions made once, not in callbacks made per batch: V8 holds a closure's
// optimised code only as long as a closure of it lives, so each major GC between two batches threw
// it away and the next batch compiled it again (bench/results/2026-11-28-worker-jit.md).
function parseMessage(kind: StreamKind, m: SourceMessage, index: number, out: ParsedBatch): void {
  const body = Buffer.from(m.data.buffer, m.data.byteOffset, m.data.byteLength);
  out.bodies.push(body);
  const subject = parseSubject(m.subject);
  if (!subject || subject.kind !== kind) {
    out.projects.push(undefined);
    out.malformed++;
    return;
  }
  const projectId = subject.projectId;
  out.projects.push(projectId);
  // A byte order mark is not part of the first line (TextDecoder used to drop it).
  const bom = body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf ? 3 : 0;
  for (let next = bom; next < body.length; ) {
    let start = next;
    let end = body.indexOf(NEWLINE, start);
    if (end === -1) end = body.length;
    next = end + 1;
    while (start < end && isSpace(body[start]!)) start++;
    while (end > start && isSpace(body[end - 1]!)) end--;
    if (start === end) continue;
    const line = body.toString('utf8', start, end);
    const problem = { reason: '', seq: m.seq };
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      problem.reason = 'not JSON';
    }
    // Capture never writes NUL or lone surrogates, but a line from elsewhere must not block the shard.
    const unstorable = !problem.reason && hasHostileText(line);
    if (unstorable) parsed = cleanStrings(parsed);
    // Bytes that are not UTF-8 were decoded as U+FFFD: the output is written from the decoded text
    // then, never copied from bytes that consumers could read differently.
    const copyable = !unstorable && !line.includes('\ufffd');
    const checked = problem.reason ? undefined : checkCapturedEvent(parsed, problem);
    if (!checked) {
      out.malformed++;
      out.warnings.push({ projectId, type: 'invalid_event', details: { ...problem, line: line.slice(0, 200) } });
      continue;
    }
    const { event, changed } = checked;
    const span = changed || !copyable ? undefined : { start, end };
    out.events.push({ projectId, event, message: index, span, offset: start, key: dedupKey(projectId, event.uuid) });
  }
}

/** The fields processing relies on; ingest guarantees them, so anything else is a bug upstream. */
export function checkCapturedEvent(value: unknown, problem: { reason: string }): { event: CapturedEvent; changed: boolean } | undefined {
  if (!isPlainObject(value)) return void (problem.reason = 'not an object');
  let changed = false;
  const e = value as Partial<CapturedEvent>;
  if (!isUuid(e.uuid)) return void (problem.reason = 'uuid missing or invalid');
  if (typeof e.event !== 'string' || e.event === '') return void (problem.reason = 'event missing');
  if (typeof e.distinct_id !== 'string' || e.distinct_id === '') return void (problem.reason = 'distinct_id missing');
  if (e.properties !== undefined && !isPlainObject(e.properties)) return void (problem.reason = 'properties not an object');
  if (e.properties === undefined) {
    e.properties = {};
    changed = true;
  }
  if (typeof e.timestamp !== 'string' || Number.isNaN(Date.parse(e.timestamp))) {
    e.timestamp = typeof e.now === 'string' && !Number.isNaN(Date.parse(e.now)) ? e.now : new Date().toISOString();
    changed = true;
  }
  // Ours to set: a captured line never carries one.
  if ('person_id' in e) {
    delete (e as { person_id?: unknown }).person_id;
    changed = true;
  }
  return { event: e as CapturedEvent, changed };
}

export interface OutputPart {
  subject: string;
  msgId: string;
  body: Buffer;
  events: number;
  /** Source message indexes this part covers. */
  messages: number[];
}

/**
 * One processed line, without its newline: bytes of a source message (`source[start, end)`)
 * followed by `tail`. Most events only gain `person_id`, so their line is copied from the source
 * and the field appended (serialising and encoding again are a large share of a worker's CPU).
 */
export interface OutputLine {
  source: Buffer | undefined;
  start: number;
  end: number;
  tail: Buffer;
  /** Where the event's line starts in its source message (BatchEvent.offset). */
  at: number;
  /** Bytes written inside the source range at `insertAt` (BatchEvent.insert). */
  insertAt?: number;
  insert?: Buffer;
}

const outputBytes = (line: OutputLine) => line.end - line.start + line.tail.length + (line.insert?.length ?? 0) + 1;

/** Room planned for what a processed line adds to its source line: `,"person_id":"<uuid>"` and the newline. */
const LINE_ALLOWANCE = 64;
/** Room left under the server's max payload for lines that grow more than that (serialised again). */
const PAYLOAD_MARGIN = 64 * 1024;
/** Bytes a PROCESSED message's headers take at most besides its id (NATS/1.0, Nats-Msg-Id, Spate-Events). */
const HEADER_BYTES = 96;

/** The largest integer each number of a PROCESSED message's id can hold (a sequence is a uint64). */
const LONGEST_NUMBER = '18446744073709551615';

/** The id of the PROCESSED part covering source messages `first`..`last` of a project (packOutputs adds `:chunk` and `.piece`). */
function partId(streamName: string, shard: number, projectId: number | string, first: number | string, last: number | string): string {
  return `${streamName}:${shard}:${projectId}:${first}-${last}`;
}

/**
 * The most bytes the line of an event a hook changed may take, before what processing adds to
 * it (`person_id`, the newline: PERSON_ID_TAIL; `$group_N`: groupsGrowth): what packOutputs can
 * publish for one line alone, under the longest id a message of this stream and shard can get.
 * A captured line (at most max_payload less 1 KiB and all processing may add, ingest/message-size.ts)
 * leaves several hundred bytes of it for the hooks, whatever its `$groups`.
 */
export function lineRoom(maxPayload: number, streamName: string, shard: number): number {
  const n = LONGEST_NUMBER;
  return bodyRoom(maxPayload, `${partId(streamName, shard, n, n, n)}:${n}.${n}`) - PERSON_ID_TAIL;
}

/** The most body bytes a PROCESSED message with id `msgId` may carry: the max payload counts its headers too. */
export function bodyRoom(maxPayload: number, msgId: string): number {
  return maxPayload - HEADER_BYTES - msgId.length;
}

/**
 * Packs processed lines into PROCESSED messages: per project, consecutive source messages (in
 * stream order) up to `partBytes` of source each, cut into chunks under the max payload. Part and
 * chunk boundaries depend only on the source bytes, never on processing: a replay in which some
 * lines are dropped (duplicates by then) or written differently cuts the same parts and chunks
 * under the same ids, so a chunk stored by an earlier try is dropped whole and none of its
 * neighbours loses or repeats a line.
 */
export function packOutputs(
  streamName: string,
  shard: number,
  messages: readonly SourceMessage[],
  projects: readonly (number | undefined)[],
  linesByMessage: readonly OutputLine[][],
  partBytes: number,
  maxPayload: number,
): OutputPart[] {
  const parts: OutputPart[] = [];
  const open = new Map<number, { first: number; last: number; sourceBytes: number; members: number[] }>();
  const flush = (projectId: number) => {
    const p = open.get(projectId);
    if (!p) return;
    open.delete(projectId);
    const base = partId(streamName, shard, projectId, messages[p.first]!.seq, messages[p.last]!.seq);
    const subject = subjectFor('processed', projectId, shard);
    const chunks = chunkLines(messages, p.members, linesByMessage, Math.max(1024, maxPayload - PAYLOAD_MARGIN));
    chunks.forEach((lines, k) => {
      const id = chunks.length === 1 ? base : `${base}:${k}`;
      // A chunk over the max payload (lines serialised again and grown far beyond their source lines)
      // is split by its bytes: only then could a replay cut it differently. Each piece leaves room for
      // its headers under the longest id a piece can get, or a piece that fits by its body alone is
      // refused as too large and an innocent event is isolated as poison.
      const pieces = splitLines(lines, bodyRoom(maxPayload, `${id}.${lines.length}`));
      pieces.forEach((piece, j) => {
        parts.push({
          subject,
          msgId: pieces.length === 1 ? id : `${id}.${j}`,
          body: joinLines(piece),
          events: piece.length,
          messages: p.members,
        });
      });
    });
  };
  messages.forEach((m, i) => {
    const projectId = projects[i];
    if (projectId === undefined) return;
    let p = open.get(projectId);
    if (!p) open.set(projectId, (p = { first: i, last: i, sourceBytes: 0, members: [] }));
    p.last = i;
    p.members.push(i);
    p.sourceBytes += m.data.length;
    if (p.sourceBytes >= partBytes) flush(projectId);
  });
  for (const projectId of [...open.keys()]) flush(projectId);
  return parts;
}

/**
 * A part's lines in chunks planned on its source lines (each counted with LINE_ALLOWANCE), so the
 * cuts fall at the same source lines whatever processing kept; chunks left empty stay in the list.
 */
function chunkLines(messages: readonly SourceMessage[], members: readonly number[], linesByMessage: readonly OutputLine[][], limit: number): OutputLine[][] {
  const chunks: OutputLine[][] = [[]];
  let planned = 0;
  for (const i of members) {
    const { data } = messages[i]!;
    const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
    const lines = linesByMessage[i] ?? [];
    let next = 0; // the first of this message's output lines not yet placed
    for (let start = 0; start < body.length; ) {
      let end = body.indexOf(NEWLINE, start);
      if (end === -1) end = body.length;
      const size = end - start + LINE_ALLOWANCE;
      if (planned > 0 && planned + size > limit) {
        chunks.push([]);
        planned = 0;
      }
      planned += size;
      const chunk = chunks[chunks.length - 1]!;
      while (next < lines.length && lines[next]!.at <= end) chunk.push(lines[next++]!);
      start = end + 1;
    }
    // Unreachable for lines parsed from this body; kept so that no line can ever be dropped here.
    while (next < lines.length) chunks[chunks.length - 1]!.push(lines[next++]!);
  }
  return chunks;
}

/** Splits lines so each message's body stays within `maxBody` bytes. */
function splitLines(lines: OutputLine[], maxBody: number): OutputLine[][] {
  const chunks: OutputLine[][] = [];
  let current: OutputLine[] = [];
  let bytes = 0;
  for (const line of lines) {
    const size = outputBytes(line);
    if (current.length > 0 && bytes + size > maxBody) {
      chunks.push(current);
      current = [];
      bytes = 0;
    }
    current.push(line);
    bytes += size;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

/** NDJSON body of lines: one allocation, each line copied once. */
function joinLines(lines: readonly OutputLine[]): Buffer {
  let total = 0;
  for (const line of lines) total += outputBytes(line);
  const body = Buffer.allocUnsafe(total);
  let at = 0;
  for (const line of lines) {
    if (line.source && line.insert) {
      // Copied whole, then its end moved to make room: each copy of part of a Buffer makes a view.
      const gap = at + line.insertAt! - line.start;
      const end = at + line.source.copy(body, at, line.start, line.end);
      body.copyWithin(gap + line.insert.length, gap, end);
      body.set(line.insert, gap);
      at = end + line.insert.length;
    } else if (line.source) at += line.source.copy(body, at, line.start, line.end);
    at += line.tail.copy(body, at);
    body[at++] = NEWLINE;
  }
  return body;
}

/** A whole line serialised again (the event changed beyond gaining `person_id`). */
export function serializedLine(value: unknown, at: number): OutputLine {
  return { source: undefined, start: 0, end: 0, tail: Buffer.from(JSON.stringify(value)), at };
}

/**
 * The processed line of an event: its captured bytes (or those a hook's change was serialised
 * to) with `"person_id"` appended before the closing brace when nothing else changed
 * (`untouched`), else the event serialised again.
 */
export function processedLine(
  out: { person_id?: string },
  captured: Buffer | undefined,
  line: Pick<BatchEvent, 'span' | 'offset' | 'insert' | 'body'>,
  untouched: boolean,
): OutputLine {
  const { span, offset: at, insert } = line;
  const source = line.body ?? captured;
  if (untouched && source && span) {
    const insertAt = insert?.at;
    const bytes = insert?.bytes;
    if (out.person_id === undefined) return { source, start: span.start, end: span.end, tail: EMPTY, at, insertAt, insert: bytes };
    // parseMessages trimmed the span and JSON.parse saw an object: it ends with its closing brace.
    if (source[span.end - 1] === CLOSE_BRACE) {
      return { source, start: span.start, end: span.end - 1, tail: Buffer.from(`,"person_id":"${out.person_id}"}`), at, insertAt, insert: bytes };
    }
  }
  return serializedLine(out, at);
}

const EMPTY = Buffer.alloc(0);

const PROPERTIES_KEY = Buffer.from('"properties":');
/** The key's name and closing quote: what any spelling of it again (spaced before its colon or not) contains. */
const KEY_AGAIN = Buffer.from('properties"');
const UNICODE_ESCAPE = Buffer.from('\\u');
const OPEN_BRACE = 0x7b;
const COMMA = 0x2c;

/**
 * Where properties can be added to the line's bytes: just after the `{` of its top-level
 * `"properties"` object. Found only when that `{` is the first in the line after its own (so the
 * key is the top level's; inside a string a `"` would be escaped, so `,"properties":{` cannot be
 * text); else undefined and the line is serialised again. The first brace, then the key's bytes
 * just before it.
 *
 * JSON.parse keeps the last of repeated keys: bytes put in the first `properties` of a line that
 * has another (never written by capture) would be lost to every reader. So a line whose rest may
 * hold the key again is serialised again too: `properties"` anywhere after the brace (spaced
 * before its colon or not, nested or not), or any `\u` escape, the only way to spell a letter of
 * the key differently. Cautious, and rare in captured lines (capture escapes only control characters).
 */
export function propertiesInsertAt(source: Buffer, span: { start: number; end: number }): { at: number; empty: boolean } | undefined {
  const brace = source.indexOf(OPEN_BRACE, span.start + 1);
  const key = brace - PROPERTIES_KEY.length;
  if (brace === -1 || brace >= span.end || key - 1 < span.start) return undefined;
  for (let i = 0; i < PROPERTIES_KEY.length; i++) if (source[key + i] !== PROPERTIES_KEY[i]) return undefined;
  const before = source[key - 1];
  if (before !== OPEN_BRACE && before !== COMMA) return undefined;
  const at = brace + 1;
  const rest = source.subarray(at, span.end);
  if (rest.includes(KEY_AGAIN) || rest.includes(UNICODE_ESCAPE)) return undefined;
  let next = at;
  while (next < span.end && isSpace(source[next]!)) next++;
  return { at, empty: source[next] === CLOSE_BRACE };
}
