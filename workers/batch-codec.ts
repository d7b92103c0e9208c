// Bytes in and out of a batch: source messages → captured events (bad lines become warnings,
// never crashes), and processed lines → PROCESSED messages whose ids depend only on the source
// sequences they cover, so replaying a planned batch republishes the same ids (JetStream drops them).
import { isUuid, parseSubject, subjectFor, type CapturedEvent, type StreamKind } from '../lib/index.js';
import { dedupKey } from './dedup.js';
import { isPlainObject } from './event-rules.js';
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
  /** The line as captured; undefined when checking it had to change it. */
  line: string | undefined;
  /** `<projectId>:<uuid>` (dedup key). */
  key: string;
}

export interface ParsedBatch {
  events: BatchEvent[];
  /** Source message index → project id (undefined: not one of our subjects). */
  projects: (number | undefined)[];
  warnings: IngestionWarning[];
  malformed: number;
}

const decoder = new TextDecoder();

export function parseMessages(kind: StreamKind, messages: readonly SourceMessage[]): ParsedBatch {
  const out: ParsedBatch = { events: [], projects: [], warnings: [], malformed: 0 };
  messages.forEach((m, index) => {
    const subject = parseSubject(m.subject);
    if (!subject || subject.kind !== kind) {
      out.projects.push(undefined);
      out.malformed++;
      return;
    }
    const projectId = subject.projectId;
    out.projects.push(projectId);
    const text = decoder.decode(m.data);
    let start = 0;
    while (start < text.length) {
      let end = text.indexOf('\n', start);
      if (end === -1) end = text.length;
      const line = text.slice(start, end);
      start = end + 1;
      if (line.trim() === '') continue;
      const problem = { reason: '', seq: m.seq };
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        problem.reason = 'not JSON';
      }
      const checked = problem.reason ? undefined : checkCaptured(parsed, problem);
      if (!checked) {
        out.malformed++;
        out.warnings.push({ projectId, type: 'invalid_event', details: { ...problem, line: line.slice(0, 200) } });
        continue;
      }
      const { event, changed } = checked;
      out.events.push({ projectId, event, message: index, line: changed ? undefined : line, key: dedupKey(projectId, event.uuid) });
    }
  });
  return out;
}

/** The fields processing relies on; ingest guarantees them, so anything else is a bug upstream. */
function checkCaptured(value: unknown, problem: { reason: string }): { event: CapturedEvent; changed: boolean } | undefined {
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
  body: Uint8Array;
  events: number;
  /** Source message indexes this part covers. */
  messages: number[];
}

const encoder = new TextEncoder();

/**
 * Packs processed lines into PROCESSED messages: per project, consecutive source messages (in
 * stream order) up to `partBytes` of source each. Part boundaries depend only on the source
 * messages, never on processing, so a replay cuts the same parts under the same ids.
 */
export function packOutputs(
  streamName: string,
  shard: number,
  messages: readonly SourceMessage[],
  projects: readonly (number | undefined)[],
  linesByMessage: readonly string[][],
  partBytes: number,
  maxPayload: number,
): OutputPart[] {
  const parts: OutputPart[] = [];
  const open = new Map<number, { first: number; last: number; sourceBytes: number; members: number[] }>();
  const flush = (projectId: number) => {
    const p = open.get(projectId);
    if (!p) return;
    open.delete(projectId);
    const lines = p.members.flatMap((i) => linesByMessage[i] ?? []);
    if (lines.length === 0) return;
    const base = `${streamName}:${shard}:${projectId}:${messages[p.first]!.seq}-${messages[p.last]!.seq}`;
    const subject = subjectFor('processed', projectId, shard);
    const chunks = splitLines(lines, maxPayload);
    chunks.forEach((chunk, k) => {
      parts.push({
        subject,
        msgId: chunks.length === 1 ? base : `${base}:${k}`,
        body: encoder.encode(chunk.join('\n') + '\n'),
        events: chunk.length,
        messages: p.members,
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

/** Splits lines so each message stays under the server's max payload (a source message near the limit grows a little). */
function splitLines(lines: string[], maxPayload: number): string[][] {
  const limit = Math.max(1024, maxPayload - 64 * 1024);
  let chars = 0;
  for (const line of lines) chars += line.length + 1;
  if (chars * 3 <= limit) return [lines]; // UTF-8 needs at most 3 bytes per UTF-16 unit
  const chunks: string[][] = [];
  let current: string[] = [];
  let bytes = 0;
  for (const line of lines) {
    const size = Buffer.byteLength(line) + 1;
    if (current.length > 0 && bytes + size > limit) {
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

/**
 * A processed line. Most events only gain `person_id`: their captured line is spliced rather than
 * serialised again (JSON.stringify is a large share of a worker's CPU).
 */
export function processedLine(out: { person_id?: string }, line: string | undefined, untouched: boolean): string {
  if (untouched && line !== undefined) {
    if (out.person_id === undefined) return line.trim();
    const end = line.lastIndexOf('}');
    if (end > 0) return `${line.slice(0, end)},"person_id":"${out.person_id}"}`;
  }
  return JSON.stringify(out);
}
