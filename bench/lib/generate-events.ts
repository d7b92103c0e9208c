// Deterministic historical events for the importer's tests and the import benchmark: event i is
// always the same (distinct_id, name, timestamp, properties.index = i), so a test can check what
// arrived against what was written without keeping the file in memory.
import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { PassThrough, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { benchEvent, type BenchEvent } from './payloads.js';

export interface GenerateOptions {
  count: number;
  /** Distinct ids the events are spread over (default 10,000). */
  distinctIds?: number;
  format?: 'ndjson' | 'array';
  gzip?: boolean;
  /** Give every event a uuid (default: none, the importer derives one). */
  withUuid?: boolean;
}

/** Event `i` of a generated file. */
export function generatedEvent(i: number, distinctIds = 10_000): BenchEvent {
  return benchEvent(i, distinctIds);
}

function uuidOf(i: number): string {
  const hex = i.toString(16).padStart(12, '0');
  return `00000000-0000-4000-8000-${hex}`;
}

/** Writes `count` events to `out` (NDJSON or a JSON array, optionally gzipped); resolves with the bytes written. */
export async function writeEvents(out: Writable, o: GenerateOptions): Promise<void> {
  const text = new PassThrough({ highWaterMark: 1024 * 1024 });
  const done = o.gzip ? pipeline(text, createGzip({ level: 1 }), out) : pipeline(text, out);
  const array = o.format === 'array';
  let buffered = array ? '[\n' : '';
  for (let i = 0; i < o.count; i++) {
    const e = generatedEvent(i, o.distinctIds);
    if (o.withUuid) e.uuid = uuidOf(i);
    buffered += (array && i > 0 ? ',\n' : '') + JSON.stringify(e) + (array ? '' : '\n');
    if (buffered.length >= 256 * 1024) {
      if (!text.write(buffered)) await once(text, 'drain');
      buffered = '';
    }
  }
  if (array) buffered += '\n]\n';
  text.end(buffered);
  await done;
}

export async function writeEventsFile(path: string, o: GenerateOptions): Promise<void> {
  await writeEvents(createWriteStream(path), o);
}
