// One file of a run in a format (JSONLines or Parquet) and a compression, written to a byte
// sink with back-pressure. Sizes are counted on the records' JSON text (deterministic: a rerun
// cuts files at the same records), so `max_file_size_mb` bounds each file by what went into it.
import { pipeline, type Transform, type Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { drained } from './drained.js';
import { constants, createBrotliCompress, createGzip } from 'node:zlib';
import { ExportError } from '../errors.js';
import { eventJsonLine, personJsonLine, type ExportRecord, type PersonRecord } from '../records.js';
import { ParquetFile } from './parquet.js';

export type FileFormat = 'JSONLines' | 'Parquet';

export interface FormatChoice {
  format: FileFormat;
  /** JSONLines: gzip, brotli or none; Parquet: the column codec (snappy by default). */
  compression: string | null;
}

/** The file name's ending: `.jsonl.gz`, `.jsonl.br`, `.parquet`. */
export function fileExtension({ format, compression }: FormatChoice): string {
  if (format === 'Parquet') return '.parquet';
  if (compression === 'gzip') return '.jsonl.gz';
  if (compression === 'brotli') return '.jsonl.br';
  return '.jsonl';
}

export function contentType({ format, compression }: FormatChoice): { ContentType: string; ContentEncoding?: string } {
  if (format === 'Parquet') return { ContentType: 'application/vnd.apache.parquet' };
  return { ContentType: compression ? 'application/octet-stream' : 'application/jsonl' };
}

/** gzip level: measured with the export bench (docs/exports.md): level 6 costs about twice level 4 for 3% smaller files. */
export const GZIP_LEVEL = 4;
/** brotli quality 5, as PostHog: near gzip's speed, smaller files. */
export const BROTLI_QUALITY = 5;

/** Text a JSONLines file may queue for its compressor or upload (part of a run's memory bound). */
export const COMPRESS_AHEAD_BYTES = 1024 * 1024;

export interface RecordFile {
  /** Text bytes of the records written so far (what max_file_size_mb is compared with). */
  readonly textBytes: number;
  readonly records: number;
  /** Adds a record; a promise only when the caller must wait (a chunk or row group going out), so a run's loop awaits once per chunk, not per record. */
  writeEvent(r: ExportRecord): Promise<void> | undefined;
  writePerson(r: PersonRecord): Promise<void> | undefined;
  /** JSONLines only: lines already formatted (event-lines.ts), `bytes` of UTF-8 text holding `records` records. */
  writeText?(text: string, bytes: number, records: number): Promise<void> | undefined;
  /** Ends the file: the sink has every byte when this resolves. */
  end(): Promise<void>;
}

export function openRecordFile(choice: FormatChoice, sink: Writable, model: 'events' | 'persons'): RecordFile {
  if (choice.format === 'Parquet') return new ParquetFile(sink, model, choice.compression);
  if (choice.format !== 'JSONLines') throw new ExportError('invalid_config', `file format ${String(choice.format)} is not supported: JSONLines or Parquet`);
  return new JsonLinesFile(sink, choice.compression);
}

class JsonLinesFile implements RecordFile {
  textBytes = 0;
  records = 0;
  private readonly out: Writable;
  private pending: string[] = [];
  private pendingBytes = 0;

  constructor(private readonly sink: Writable, compression: string | null) {
    if (!compression) {
      this.out = sink;
      return;
    }
    let compressor: Transform;
    if (compression === 'gzip') compressor = createGzip({ level: GZIP_LEVEL, chunkSize: 256 * 1024 });
    else if (compression === 'brotli') compressor = createBrotliCompress({ params: { [constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY } });
    else throw new ExportError('invalid_config', `compression ${compression} is not supported for JSONLines: gzip or brotli`);
    // zlib runs on the thread pool: the event loop goes on reading while it compresses. A sink
    // that fails (the upload did) destroys the compressor too, so nothing waits on it for ever.
    pipeline(compressor, sink, () => undefined);
    this.out = compressor;
  }

  writeEvent(r: ExportRecord): Promise<void> | undefined {
    return this.add(eventJsonLine(r));
  }

  writePerson(r: PersonRecord): Promise<void> | undefined {
    return this.add(personJsonLine(r));
  }

  writeText(text: string, bytes: number, records: number): Promise<void> | undefined {
    return this.add(text, bytes, records);
  }

  private add(text: string, bytes = Buffer.byteLength(text), records = 1): Promise<void> | undefined {
    this.textBytes += bytes;
    this.records += records;
    this.pending.push(text);
    this.pendingBytes += bytes;
    // Lines go out in chunks of ~256 KiB: one write per line would cost more than the line.
    return this.pendingBytes >= 256 * 1024 ? this.flush() : undefined;
  }

  private async flush(): Promise<void> {
    if (this.pending.length === 0) return;
    const chunk = this.pending.join('');
    this.pending = [];
    this.pendingBytes = 0;
    this.out.write(chunk);
    // zlib compresses on the thread pool while the event loop formats the next lines: wait only
    // when a few chunks are queued (waiting after each one left the two taking turns).
    if (this.out.writableLength >= COMPRESS_AHEAD_BYTES) await drained(this.out);
  }

  async end(): Promise<void> {
    await this.flush();
    this.out.end();
    await finished(this.sink, { readable: false });
  }
}

