// Reading NDJSON lines that workers wrote: one bad line never spoils its neighbours, strings are
// made storable in PostgreSQL, and a line without an id gets one derived from where it sits in
// the stream (so a redelivered message still stores each line once).
import { createHash } from 'node:crypto';

const decoder = new TextDecoder();

/** Each line of the message, parsed, or `undefined` for a line that is not a JSON object. */
export function parseLines(data: Uint8Array): Array<Record<string, unknown> | undefined> {
  const out: Array<Record<string, unknown> | undefined> = [];
  for (const line of decoder.decode(data).split('\n')) {
    if (line.trim() === '') continue;
    try {
      const value: unknown = JSON.parse(line);
      out.push(typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined);
    } catch {
      out.push(undefined);
    }
  }
  return out;
}

export { parseTimestamp } from '../iso-time.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuidText(value: unknown): value is string {
  return typeof value === 'string' && UUID.test(value);
}

/** A UUID (version 8, name-based) for line `line` of the message at `seq` of `stream`. */
export function derivedId(stream: string, seq: number, line: number): string {
  const h = createHash('sha256').update(`${stream}:${seq}:${line}`).digest('hex');
  const variant = ((parseInt(h[16]!, 16) & 0x3) | 0x8).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}
