// S3 and S3-compatible stores (docs/exports.md, "S3"): one object per run and part, named by the
// interval (and the backfill) so a rerun overwrites the same keys; streamed through
// lib-storage's Upload (PutObject for a small file, multipart for a big one, parts of
// PART_SIZE, QUEUE_SIZE in flight: memory per run is bounded by PART_SIZE × (QUEUE_SIZE + 1)).
import http from 'node:http';
import https from 'node:https';
import { Transform } from 'node:stream';
import { HeadBucketCommand, PutObjectCommand, S3Client, S3ServiceException, type ServerSideEncryption } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import type { EgressPolicy } from '../egress.js';
import { ExportError } from '../errors.js';
import type { EventLines } from '../formats/event-lines.js';
import { fileExtension, openRecordFile, contentType, type FileFormat, type FormatChoice, type RecordFile } from '../formats/file-writer.js';
import { pythonIso, type ExportRecord, type PersonRecord } from '../records.js';
import type { Delivered, Destination, DestinationWriter, RunTarget } from './destination.js';

export const PART_SIZE = 8 * 1024 * 1024;
export const QUEUE_SIZE = 2;

export interface S3Config {
  bucket_name: string;
  region: string;
  prefix: string;
  aws_access_key_id?: string | null;
  aws_secret_access_key?: string | null;
  compression?: string | null;
  encryption?: string | null;
  kms_key_id?: string | null;
  endpoint_url?: string | null;
  file_format?: string | null;
  max_file_size_mb?: number | null;
  use_virtual_style_addressing?: boolean | null;
}

/** `prefix` with PostHog's placeholders filled from the interval (date parts from its end). */
export function formatPrefix(prefix: string, run: Pick<RunTarget, 'start' | 'end' | 'model'>): string {
  const end = run.end;
  const two = (n: number) => String(n).padStart(2, '0');
  const values: Record<string, string> = {
    year: String(end.getUTCFullYear()),
    month: two(end.getUTCMonth() + 1),
    day: two(end.getUTCDate()),
    hour: two(end.getUTCHours()),
    minute: two(end.getUTCMinutes()),
    second: two(end.getUTCSeconds()),
    table: run.model,
    data_interval_start: pythonIso(run.start),
    data_interval_end: pythonIso(end),
  };
  return prefix.replace(/\{(\w+)\}/g, (whole, name: string) => values[name] ?? whole);
}

/** The key of part `part` (undefined: the run's only file) of a run. */
export function objectKey(config: Pick<S3Config, 'prefix'>, run: RunTarget, choice: FormatChoice, part: number | undefined): string {
  const base = `${pythonIso(run.start)}-${pythonIso(run.end)}${run.backfillId ? `-backfill-${run.backfillId}` : ''}`;
  const name = `${base}${part === undefined ? '' : `-${part}`}${fileExtension(choice)}`;
  return joinKey(formatPrefix(config.prefix ?? '', run), name);
}

export function manifestKey(config: Pick<S3Config, 'prefix'>, run: RunTarget): string {
  const base = `${pythonIso(run.start)}-${pythonIso(run.end)}${run.backfillId ? `-backfill-${run.backfillId}` : ''}`;
  return joinKey(formatPrefix(config.prefix ?? '', run), `${base}_manifest.json`);
}

function joinKey(prefix: string, name: string): string {
  const trimmed = prefix.replace(/^\/+/, '').replace(/\/+$/, '');
  return trimmed ? `${trimmed}/${name}` : name;
}

/** An S3 failure as a person can act on it: "AccessDenied on bucket x: …". */
export function s3Error(err: unknown, bucket: string): ExportError {
  if (err instanceof ExportError) return err;
  if (err instanceof S3ServiceException) {
    const status = err.$metadata?.httpStatusCode ?? 0;
    const name = err.name === 'Forbidden' || err.name === '403' ? 'AccessDenied' : err.name === 'NotFound' || err.name === '404' ? 'NoSuchBucket' : err.name;
    const message = `${name} on bucket ${bucket}${err.message && err.message !== name && !/^UnknownError$/.test(err.message) ? `: ${err.message}` : ''}`;
    if (status === 403 || /AccessDenied|InvalidAccessKeyId|SignatureDoesNotMatch|InvalidToken|ExpiredToken/.test(name)) return new ExportError('access_denied', message, { cause: err });
    if (status === 404 || /NoSuchBucket|NoSuchKey/.test(name)) return new ExportError('not_found', message, { cause: err });
    if (status === 429 || status >= 500 || /SlowDown|RequestTimeout|InternalError|ServiceUnavailable/.test(name)) return new ExportError('unavailable', message, { cause: err });
    if (status >= 400) return new ExportError('rejected', message, { cause: err });
  }
  const e = err as NodeJS.ErrnoException;
  const message = e?.message ?? String(err);
  return new ExportError('unavailable', `S3 bucket ${bucket}: ${e?.code ? `${e.code} ` : ''}${message}`, { cause: err });
}

function formatChoice(config: S3Config): FormatChoice {
  const format = (config.file_format || 'JSONLines') as FileFormat;
  return { format, compression: config.compression || null };
}

export class S3Destination implements Destination {
  readonly type = 'S3' as const;
  private readonly client: S3Client;
  private readonly agents: { http: http.Agent; https: https.Agent };

  constructor(
    private readonly config: S3Config,
    egress: EgressPolicy,
  ) {
    if (!config.bucket_name) throw new ExportError('invalid_config', 'S3: bucket_name is missing');
    // Every connection's addresses pass the egress policy (a lookup hook, so also after a DNS change).
    this.agents = {
      http: new http.Agent({ keepAlive: true, lookup: egress.lookup }),
      https: new https.Agent({ keepAlive: true, lookup: egress.lookup }),
    };
    const endpoint = config.endpoint_url || undefined;
    this.client = new S3Client({
      region: config.region || 'us-east-1',
      endpoint,
      forcePathStyle: endpoint !== undefined && config.use_virtual_style_addressing !== true,
      credentials:
        config.aws_access_key_id && config.aws_secret_access_key
          ? { accessKeyId: config.aws_access_key_id, secretAccessKey: config.aws_secret_access_key }
          : undefined,
      // SDK 3.729+ adds CRC32 checksums by default, which R2, MinIO, B2 and other S3-compatible
      // stores refuse: only when the operation requires one on a custom endpoint.
      requestChecksumCalculation: endpoint ? 'WHEN_REQUIRED' : 'WHEN_SUPPORTED',
      responseChecksumValidation: endpoint ? 'WHEN_REQUIRED' : 'WHEN_SUPPORTED',
      requestHandler: { httpAgent: this.agents.http, httpsAgent: this.agents.https, connectionTimeout: 10_000, requestTimeout: 120_000 },
      maxAttempts: 3,
    });
  }

  async check(signal: AbortSignal): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.config.bucket_name }), { abortSignal: signal });
    } catch (err) {
      throw s3Error(err, this.config.bucket_name);
    }
  }

  open(run: RunTarget, signal: AbortSignal): Promise<DestinationWriter> {
    try {
      const choice = formatChoice(this.config);
      // Fails now, before anything is read, when the format or compression cannot be written.
      openRecordFile(choice, new Transform(), run.model);
      return Promise.resolve(new S3Writer(this.client, this.config, run, choice, signal));
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  close(): Promise<void> {
    this.client.destroy();
    this.agents.http.destroy();
    this.agents.https.destroy();
    return Promise.resolve();
  }
}

interface OpenFile {
  key: string;
  file: RecordFile;
  counted: { bytes: number };
  upload: Promise<unknown>;
  abort(): Promise<void>;
}

class S3Writer implements DestinationWriter {
  private current: OpenFile | undefined;
  private readonly keys: string[] = [];
  private records = 0;
  private bytes = 0;
  private readonly maxTextBytes: number | undefined;

  constructor(
    private readonly client: S3Client,
    private readonly config: S3Config,
    private readonly run: RunTarget,
    private readonly choice: FormatChoice,
    private readonly signal: AbortSignal,
  ) {
    const mb = config.max_file_size_mb;
    this.maxTextBytes = typeof mb === 'number' && mb > 0 ? mb * 1024 * 1024 : undefined;
    if (choice.format === 'JSONLines' && run.model === 'events') this.writeEventLines = (lines) => this.writeLines(lines);
  }

  /** JSONLines events: lines formatted in the role's threads (formats/line-pool.ts). */
  readonly writeEventLines?: (lines: EventLines) => Promise<void>;

  private get split(): boolean {
    return this.maxTextBytes !== undefined;
  }

  private openFile(): OpenFile {
    const key = objectKey(this.config, this.run, this.choice, this.split ? this.keys.length : undefined);
    const counted = { bytes: 0 };
    const body = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        counted.bytes += chunk.length;
        callback(null, chunk);
      },
    });
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.config.bucket_name, Key: key, Body: body, ...contentType(this.choice), ...this.encryption() },
      partSize: PART_SIZE,
      queueSize: QUEUE_SIZE,
      leavePartsOnError: false,
    });
    const done = upload.done();
    // A failed upload stops the writes feeding it (they would wait for 'drain' for ever).
    done.catch((err: unknown) => body.destroy(err instanceof Error ? err : new Error(String(err))));
    this.keys.push(key);
    return { key, file: openRecordFile(this.choice, body, this.run.model), counted, upload: done, abort: () => upload.abort().catch(() => undefined) };
  }

  private encryption(): { ServerSideEncryption?: ServerSideEncryption; SSEKMSKeyId?: string } {
    const out: { ServerSideEncryption?: ServerSideEncryption; SSEKMSKeyId?: string } = {};
    if (this.config.encryption) out.ServerSideEncryption = this.config.encryption as ServerSideEncryption;
    if (this.config.kms_key_id) out.SSEKMSKeyId = this.config.kms_key_id;
    return out;
  }

  async writeEvents(records: readonly ExportRecord[]): Promise<void> {
    // Awaits only where a file is closed or a chunk goes out: an await per record cost ~10 % of a
    // run's main thread (bench/results/2026-11-28-exports.md).
    for (const r of records) {
      const file = this.fileWithRoom() ?? (await this.nextFile());
      const wait = file.writeEvent(r);
      if (wait) await wait;
    }
    this.signal.throwIfAborted();
  }

  async writePersons(records: readonly PersonRecord[]): Promise<void> {
    for (const r of records) {
      const file = this.fileWithRoom() ?? (await this.nextFile());
      const wait = file.writePerson(r);
      if (wait) await wait;
    }
    this.signal.throwIfAborted();
  }

  /** Files are cut where the records would cut them: a line goes in while its file holds less than max_file_size_mb. */
  private async writeLines({ text, ends, bytes }: EventLines): Promise<void> {
    for (let from = 0; from < ends.length; ) {
      const file = this.fileWithRoom() ?? (await this.nextFile());
      let to = from;
      let size = 0;
      if (this.maxTextBytes === undefined) {
        to = ends.length;
        for (const b of bytes) size += b;
      } else {
        while (to < ends.length && file.textBytes + size < this.maxTextBytes) size += bytes[to++]!;
      }
      const start = from === 0 ? 0 : ends[from - 1]!;
      const chunk = from === 0 && to === ends.length ? text : text.slice(start, ends[to - 1]);
      const wait = file.writeText!(chunk, size, to - from);
      if (wait) await wait;
      from = to;
    }
    this.signal.throwIfAborted();
  }

  /** The open file while it has room (max_file_size_mb), opening the first one. */
  private fileWithRoom(): RecordFile | undefined {
    if (this.current && this.maxTextBytes !== undefined && this.current.file.textBytes >= this.maxTextBytes) return undefined;
    return (this.current ??= this.openFile()).file;
  }

  /** Closes the full file and opens the next. */
  private async nextFile(): Promise<RecordFile> {
    await this.closeFile();
    return (this.current = this.openFile()).file;
  }

  private async closeFile(): Promise<void> {
    const open = this.current;
    if (!open) return;
    this.current = undefined;
    try {
      await open.file.end();
      await open.upload;
    } catch (err) {
      await open.abort();
      throw s3Error(err, this.config.bucket_name);
    }
    this.records += open.file.records;
    this.bytes += open.counted.bytes;
  }

  async commit(): Promise<Delivered> {
    await this.closeFile();
    if (this.split && this.keys.length > 0) {
      // Written last: a reader that finds the manifest finds every file it names complete.
      const manifest = JSON.stringify({ files: this.keys });
      try {
        await this.client.send(
          new PutObjectCommand({ Bucket: this.config.bucket_name, Key: manifestKey(this.config, this.run), Body: manifest, ContentType: 'application/json', ...this.encryption() }),
          { abortSignal: this.signal },
        );
      } catch (err) {
        throw s3Error(err, this.config.bucket_name);
      }
    }
    return {
      records: this.records,
      bytes: this.bytes,
      detail: this.keys.length === 0 ? 'no file (no records)' : `s3://${this.config.bucket_name}/${this.keys.join(`, s3://${this.config.bucket_name}/`)}`,
    };
  }

  async abort(): Promise<void> {
    const open = this.current;
    this.current = undefined;
    await open?.abort();
  }
}
