// `spate import`, the engine: reads each input in order, validates records, spreads them over
// lanes by distinct_id, sends byte-sized /batch/ requests with historical_migration: true,
// retries what may succeed later, bisects a refused batch down to the record capture refuses,
// and records every acknowledgement in the checkpoint.
//
// "Nothing twice, nothing skipped" (see checkpoint.ts for the watermarks): a record is skipped
// on a re-run only if the checkpoint says capture acknowledged it; everything else is sent
// again. A batch that was in flight when the importer died may have been stored without the
// importer hearing back: its extent was written to the checkpoint before it was sent, and a
// re-run sends exactly it again first — the same events with the same uuids (event-uuid.ts), so
// capture makes the same HISTORICAL messages under the same ids and JetStream keeps one copy.
import { createHash } from 'node:crypto';
import { createWriteStream, existsSync, type WriteStream } from 'node:fs';
import { resolve as resolvePath } from 'node:path';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { batchHead, bodySize, buildBody, type BatchItem } from './batch.js';
import { Checkpoint, type FileProgress } from './checkpoint.js';
import { eventUuidFactory } from './event-uuid.js';
import { Lane, laneOf } from './lanes.js';
import { PrefixHasher } from './prefix-hash.js';
import { InputFormatError, recordSplitter, type InputFormat, type RawRecord } from './records.js';
import { backoffMs, postBatch, type SendOutcome } from './sender.js';
import { openSource, type InputSource } from './source.js';
import { validateRecord } from './validate.js';

export interface ImportOptions {
  /** Paths, `-` for stdin. Imported one after the other, in this order. */
  files: string[];
  /** The /batch/ endpoint. */
  batchUrl: string;
  apiKey: string;
  checkpointPath: string;
  /** Largest request body (a single bigger record is sent alone). */
  batchBytes: number;
  /** Requests in flight = lanes (fixed per file by its checkpoint). */
  lanes: number;
  invalid: 'skip' | 'stop';
  /** Forget the files' progress and send everything again. */
  restart: boolean;
  gzip: boolean;
  requestTimeoutMs: number;
  /** How long one batch may keep failing with retryable answers before the run stops. */
  retryForMs: number;
  /** A partly filled batch is sent after this long without filling (slow stdin). */
  lingerMs: number;
  /** NDJSON file that receives every invalid record with its line and reason. */
  rejectsPath?: string;
  stdin?: Readable;
}

export interface FileReport {
  file: string;
  format: InputFormat | undefined;
  gzip: boolean;
  /** imported: read to the end, every record acknowledged or invalid; partial: the run stopped. */
  outcome: 'imported' | 'already-imported' | 'empty' | 'partial';
  /** Events sent and acknowledged in this run. */
  sent: number;
  /** Records skipped because an earlier run had them acknowledged. */
  skipped: number;
  invalid: number;
  /** Events acknowledged over every run. */
  acknowledgedTotal: number;
  lanes: number;
}

export interface ImportFailure {
  message: string;
  file?: string;
  line?: number;
}

export interface ImportResult {
  status: 'done' | 'failed' | 'interrupted';
  error?: ImportFailure;
  files: FileReport[];
  sent: number;
  sentBytes: number;
  skipped: number;
  invalid: number;
  retries: number;
  elapsedMs: number;
  checkpoint: string;
}

export interface ImportObserver {
  fileStarted?(info: { file: string; size: number | undefined; gzip: boolean; format: InputFormat; lanes: number; resumedFrom: number }): void;
  fileFinished?(report: FileReport): void;
  invalid?(info: { file: string; line: number; reason: string; skipped: boolean }): void;
  retry?(info: { reason: string; delayMs: number; attempt: number }): void;
  note?(message: string): void;
}

/** Live counters for progress displays. */
export class ImportStats {
  file = '';
  fileSize: number | undefined = undefined;
  rawBytesRead: () => number = () => 0;
  /** Records of the current file: read, and handled (acknowledged, skipped, invalid). */
  read = 0;
  fileSent = 0;
  fileSkipped = 0;
  fileInvalid = 0;
  sent = 0;
  sentBytes = 0;
  skipped = 0;
  invalid = 0;
  retries = 0;
  inflight = 0;
  readonly startedAt = performance.now();
}

type StopMode = 'drain' | 'halt' | 'abort';
const STOP_RANK: Record<StopMode, number> = { drain: 1, halt: 2, abort: 3 };

export function projectHash(apiKey: string): string {
  return createHash('sha256').update(apiKey).digest('hex').slice(0, 16);
}

export class Importer {
  readonly stats = new ImportStats();
  private stopMode: StopMode | undefined;
  private interrupted = false;
  private failure: ImportFailure | undefined;
  private readonly haltController = new AbortController();
  private readonly abortController = new AbortController();
  private readonly head: Buffer;
  private checkpoint: Checkpoint | undefined;
  private rejects: WriteStream | undefined;
  private lanes: Lane[] = [];

  constructor(
    private readonly options: ImportOptions,
    private observer: ImportObserver = {},
  ) {
    this.head = batchHead(options.apiKey);
  }

  /** Who hears about files, invalid records and retries (a progress display). */
  observe(observer: ImportObserver): void {
    this.observer = observer;
  }

  /** Ctrl-C: `halt` lets requests in flight finish; `abort` cuts them off. Either way the checkpoint is saved. */
  stop(mode: 'halt' | 'abort'): void {
    this.interrupted = true;
    this.requestStop(mode);
  }

  async run(): Promise<ImportResult> {
    const files: FileReport[] = [];
    try {
      // Every input must be there before the first is sent, so a typo does not stop a run halfway.
      for (const name of this.options.files) {
        if (name !== '-' && !existsSync(name)) throw new Error(`cannot read ${name}: no such file`);
      }
      this.checkpoint = Checkpoint.open(this.options.checkpointPath);
      for (const name of this.options.files) {
        if (this.stopMode) break;
        const report = await this.importFile(name);
        files.push(report);
        this.observer.fileFinished?.(report);
      }
    } catch (err) {
      this.fail({ message: (err as Error).message }, 'halt');
    } finally {
      try {
        await this.checkpoint?.close();
      } catch (err) {
        this.fail({ message: (err as Error).message }, 'halt');
      }
      await new Promise<void>((resolve) => (this.rejects ? this.rejects.end(resolve) : resolve()));
    }
    const s = this.stats;
    return {
      status: this.failure ? 'failed' : this.interrupted ? 'interrupted' : 'done',
      error: this.failure,
      files,
      sent: s.sent,
      sentBytes: s.sentBytes,
      skipped: s.skipped,
      invalid: s.invalid,
      retries: s.retries,
      elapsedMs: performance.now() - s.startedAt,
      checkpoint: this.options.checkpointPath,
    };
  }

  private requestStop(mode: StopMode): void {
    if (this.stopMode && STOP_RANK[this.stopMode] >= STOP_RANK[mode]) return;
    this.stopMode = mode;
    if (mode === 'drain') return; // the reader stops; lanes send what they hold
    this.haltController.abort();
    if (mode === 'abort') this.abortController.abort();
    for (const lane of this.lanes) lane.halt();
  }

  private fail(failure: ImportFailure, mode: StopMode): void {
    this.failure ??= failure;
    this.requestStop(mode);
  }

  private async importFile(name: string): Promise<FileReport> {
    const checkpoint = this.checkpoint!;
    const source = await openSource(name, this.options.stdin);
    const report: FileReport = { file: name, format: source.format, gzip: source.gzip, outcome: 'partial', sent: 0, skipped: 0, invalid: 0, acknowledgedTotal: 0, lanes: 0 };
    try {
      const project = projectHash(this.options.apiKey);
      const file = name === '-' ? '-' : resolvePath(name);
      const head = source.identity;
      let progress = this.options.restart ? undefined : checkpoint.find(project, file, head);
      if (progress?.complete) {
        if (progress.head === head) {
          report.outcome = 'already-imported';
          report.acknowledgedTotal = progress.acknowledged;
          report.lanes = progress.lanes;
          this.observer.note?.(`${name}: already imported (${progress.acknowledged} events); --restart sends it again`);
          return report;
        }
        progress = undefined; // another file at the same path: a new import
      } else if (progress && progress.head !== head && progress.verified === null) {
        // Changed in its first MiB, and nothing recorded to tell an edit from another file.
        if (progress.acknowledged > 0) {
          throw new Error(
            `${name} changed since it was partly imported (checkpoint ${checkpoint.path}) and what was sent cannot be verified. ` +
              'Pass --restart to import it from the start.',
          );
        }
        progress = undefined;
      }
      if (source.format === undefined) {
        report.outcome = 'empty';
        this.observer.note?.(`${name}: empty, nothing to import`);
        return report;
      }
      if (progress && progress.lanes !== this.options.lanes) {
        // Lanes are part of what the watermarks mean (checkpoint.ts): a file keeps the count it began with.
        this.observer.note?.(`${name}: resuming with ${progress.lanes} requests in flight, as it began (--concurrency applies to new files)`);
      }
      progress ??= checkpoint.begin({ file, head, project, format: source.format, lanes: this.options.lanes });
      progress.head = head;
      await checkpoint.save();
      report.lanes = progress.lanes;
      await this.readFile(source, progress.format, progress, report);
      report.acknowledgedTotal = progress.acknowledged;
      if (!this.stopMode) {
        progress.complete = true;
        report.outcome = 'imported';
      }
      await checkpoint.save();
      return report;
    } finally {
      source.close();
    }
  }

  private async readFile(source: InputSource, format: InputFormat, progress: FileProgress, report: FileReport): Promise<void> {
    const stats = this.stats;
    stats.file = source.name;
    stats.fileSize = source.size;
    stats.rawBytesRead = () => source.rawBytesRead();
    stats.read = 0;
    stats.fileSent = 0;
    stats.fileSkipped = 0;
    stats.fileInvalid = 0;
    const { batchBytes } = this.options;
    const fits = (count: number, bytes: number) => bodySize(this.head, count, bytes) <= batchBytes;
    const prefix = new PrefixHasher(progress.verified);
    const inflight = (progress.inflight ??= Array<number>(progress.lanes).fill(0));
    this.lanes = progress.watermarks.map(
      (watermark, i) =>
        new Lane(i, 1, fits, (items) => this.deliver(source.name, progress, prefix, i, items, report), inflight[i]! > watermark ? inflight[i] : undefined),
    );
    const lanes = this.lanes;
    // The identity recorded when the import began, not the current head: a file fixed up in its
    // first MiB and resumed must give the records it resends the uuids they were first sent with.
    const uuidOf = eventUuidFactory(progress.identity);
    const minWatermark = Math.min(...progress.watermarks);
    this.observer.fileStarted?.({ file: source.name, size: source.size, gzip: source.gzip, format, lanes: lanes.length, resumedFrom: progress.acknowledged });

    const changed = (line: number | undefined) =>
      this.fail(
        {
          message:
            `${source.name} ${line === undefined ? 'is shorter than' : `changed before line ${line}`} since it was partly imported (checkpoint ${this.options.checkpointPath}); ` +
            'resuming would skip records that were never sent. Pass --restart to import it from the start.',
          file: source.name,
          line,
        },
        'halt',
      );
    const handle = (rec: RawRecord): Promise<void> | undefined => {
      stats.read++;
      if (!prefix.add(rec.position, rec.bytes)) {
        changed(rec.line);
        return undefined;
      }
      if (rec.position <= minWatermark) {
        stats.skipped++;
        stats.fileSkipped++;
        report.skipped++;
        return undefined;
      }
      const text = rec.bytes.toString('utf8');
      const checked = validateRecord(text);
      if (!checked.ok) {
        this.invalidRecord(source.name, rec.line, checked.reason, text, report, 'drain');
        return undefined;
      }
      const lane = laneOf(checked.distinctId, lanes.length);
      if (rec.position <= progress.watermarks[lane]!) {
        stats.skipped++;
        stats.fileSkipped++;
        report.skipped++;
        return undefined;
      }
      return lanes[lane]!.add({ position: rec.position, line: rec.line, bytes: rec.bytes, uuid: checked.hasUuid ? undefined : uuidOf(rec.position) });
    };

    // A slow input (stdin from another program) still gets its events sent: a lane with nothing
    // in flight sends its partial batch after lingerMs.
    const linger = setInterval(() => {
      const now = performance.now();
      for (const lane of lanes) {
        if (lane.pending > 0 && lane.idle && !lane.replaying && now - lane.openedAt >= this.options.lingerMs) void lane.seal();
      }
    }, Math.max(50, Math.min(1000, this.options.lingerMs / 2)));
    linger.unref();

    const splitter = recordSplitter(format);
    try {
      reading: for await (const chunk of source.chunks()) {
        if (this.stopMode) break;
        for (const rec of splitter.push(chunk)) {
          const wait = handle(rec);
          if (wait) await wait;
          if (this.stopMode) break reading;
        }
      }
      if (!this.stopMode) {
        for (const rec of splitter.end()) {
          const wait = handle(rec);
          if (wait) await wait;
          if (this.stopMode) break;
        }
      }
    } catch (err) {
      const line = err instanceof InputFormatError ? err.line : undefined;
      this.fail({ message: `${source.name}${line ? `:${line}` : ''}: ${(err as Error).message}`, file: source.name, line }, 'drain');
    }
    if (!this.stopMode && prefix.pending) changed(undefined);
    // Send what the lanes hold (unless halted), then wait for everything in flight.
    for (const lane of lanes) {
      const wait = lane.seal();
      if (wait) await wait;
    }
    await Promise.all(lanes.map((lane) => lane.drained()));
    clearInterval(linger);
  }

  private invalidRecord(file: string, line: number, reason: string, text: string, report: FileReport, mode: StopMode): void {
    const skipped = this.options.invalid === 'skip';
    this.stats.invalid++;
    this.stats.fileInvalid++;
    report.invalid++;
    this.observer.invalid?.({ file, line, reason, skipped });
    if (this.options.rejectsPath) {
      this.rejects ??= createWriteStream(this.options.rejectsPath, { flags: 'a' });
      this.rejects.write(JSON.stringify({ file, line, reason, record: text.length <= 64 * 1024 ? text : `${text.slice(0, 64 * 1024)}…` }) + '\n');
    }
    if (!skipped) this.fail({ message: `${file}:${line}: ${reason}`, file, line }, mode);
  }

  /** Sends one lane's batch until it is acknowledged, refused, or the import stops. */
  private async deliver(file: string, progress: FileProgress, prefix: PrefixHasher, lane: number, items: BatchItem[], report: FileReport): Promise<void> {
    let outcome: SendOutcome | { kind: 'stopped' } | { kind: 'gave-up'; reason: string };
    try {
      // Durable before it is sent: a re-run must be able to send exactly this batch again.
      progress.inflight![lane] = items.at(-1)!.position;
      await this.checkpoint!.save();
    } catch (err) {
      this.fail({ message: (err as Error).message }, 'halt');
      return;
    }
    try {
      outcome = await this.send(items);
    } catch (err) {
      this.fail({ message: `sending to ${this.options.batchUrl}: ${(err as Error).message}` }, 'halt');
      return;
    }
    switch (outcome.kind) {
      case 'ok':
        this.acknowledge(progress, prefix, lane, items, true, report);
        return;
      case 'stopped':
        return;
      case 'fatal':
        this.fail({ message: `capture refused a batch (${file}, lines ${items[0]!.line}–${items.at(-1)!.line}): ${outcome.reason}`, file }, 'halt');
        return;
      case 'gave-up':
        this.fail({ message: `gave up on a batch (${file}, lines ${items[0]!.line}–${items.at(-1)!.line}): ${outcome.reason}`, file }, 'halt');
        return;
      case 'retry':
        // send() turns exhausted retries into 'fatal'; unreachable.
        return;
      case 'rejected': {
        if (items.length > 1) {
          // Halves, in order, so per-distinct_id order holds; repeats until the culprit is alone.
          const mid = items.length >> 1;
          await this.deliver(file, progress, prefix, lane, items.slice(0, mid), report);
          if (this.stopMode === 'halt' || this.stopMode === 'abort') return;
          await this.deliver(file, progress, prefix, lane, items.slice(mid), report);
          return;
        }
        const item = items[0]!;
        this.invalidRecord(file, item.line, `capture refused it: ${outcome.reason}`, item.bytes.toString('utf8'), report, 'halt');
        if (this.options.invalid === 'skip') this.acknowledge(progress, prefix, lane, items, false, report);
        return;
      }
    }
  }

  private async send(items: BatchItem[]): Promise<SendOutcome | { kind: 'stopped' } | { kind: 'gave-up'; reason: string }> {
    const body = buildBody(this.head, items);
    let failingSince: number | undefined;
    for (let attempt = 1; ; attempt++) {
      if (this.abortController.signal.aborted) return { kind: 'stopped' };
      this.stats.inflight++;
      let outcome: SendOutcome;
      try {
        outcome = await postBatch(this.options.batchUrl, body, { timeoutMs: this.options.requestTimeoutMs, gzip: this.options.gzip, signal: this.abortController.signal });
      } catch (err) {
        if (this.abortController.signal.aborted) return { kind: 'stopped' };
        throw err;
      } finally {
        this.stats.inflight--;
      }
      if (outcome.kind === 'ok') this.stats.sentBytes += body.length;
      if (outcome.kind !== 'retry') return outcome;
      // A halted import does not retry: the batch stays unacknowledged and a re-run sends it.
      if (this.haltController.signal.aborted) return { kind: 'stopped' };
      failingSince ??= performance.now();
      if (performance.now() - failingSince > this.options.retryForMs) {
        return { kind: 'gave-up', reason: `still failing after ${Math.round(this.options.retryForMs / 1000)}s of retries: ${outcome.reason}` };
      }
      const delayMs = backoffMs(attempt, outcome.retryAfterMs);
      this.stats.retries++;
      this.observer.retry?.({ reason: outcome.reason, delayMs, attempt });
      await sleep(delayMs, undefined, { signal: this.haltController.signal }).catch(() => undefined);
    }
  }

  private acknowledge(progress: FileProgress, prefix: PrefixHasher, lane: number, items: BatchItem[], sent: boolean, report: FileReport): void {
    // Items of a lane are in file order: everything of this lane up to the last one is done.
    progress.watermarks[lane] = items.at(-1)!.position;
    progress.inflight![lane] = 0;
    progress.verified = prefix.coveredUpTo(Math.min(...progress.watermarks)) ?? progress.verified;
    if (sent) {
      progress.acknowledged += items.length;
      this.stats.sent += items.length;
      this.stats.fileSent += items.length;
      report.sent += items.length;
    }
    this.checkpoint!.save().catch((err: unknown) => this.fail({ message: (err as Error).message }, 'halt'));
  }
}

