// What `spate import` shows while it runs, on stderr: a progress bar (cli-progress) on a
// terminal, plain log lines every few seconds otherwise (CI logs, files), or nothing.
import cliProgress from 'cli-progress';
import type { ImportObserver, ImportStats } from './importer.js';

export type ProgressMode = 'bar' | 'lines' | 'none';

export interface Progress {
  observer: ImportObserver;
  stop(): void;
}

/** Invalid records shown one by one before the rest are only counted. */
const SHOWN_INVALID = 20;
const RATE_WINDOW_MS = 5_000;

const n = (x: number) => Math.round(x).toLocaleString('en-US');
const mb = (bytes: number) => (bytes / 1e6).toFixed(1);

/** Events/s and MB/s over the last few seconds. */
class RateMeter {
  private samples: { t: number; events: number; bytes: number }[] = [];
  sample(events: number, bytes: number): { eventsPerSec: number; mbPerSec: number } {
    const t = performance.now();
    this.samples.push({ t, events, bytes });
    while (this.samples.length > 2 && t - this.samples[0]!.t > RATE_WINDOW_MS) this.samples.shift();
    const first = this.samples[0]!;
    const seconds = (t - first.t) / 1000;
    if (seconds <= 0) return { eventsPerSec: 0, mbPerSec: 0 };
    return { eventsPerSec: (events - first.events) / seconds, mbPerSec: (bytes - first.bytes) / seconds / 1e6 };
  }
}

/**
 * Share of the file done: bytes read, scaled by the share of records read that are handled
 * (acknowledged, skipped or invalid) — reading runs ahead of sending by the batches in memory,
 * and a small gzip file is read long before its events are sent.
 */
function doneFraction(stats: ImportStats): number {
  if (!stats.fileSize) return 0;
  const read = Math.min(1, stats.rawBytesRead() / stats.fileSize);
  const handled = stats.read > 0 ? Math.min(1, (stats.fileSent + stats.fileSkipped + stats.fileInvalid) / stats.read) : 0;
  return read * handled;
}

function eta(stats: ImportStats, startedReading: number): string {
  if (!stats.fileSize) return '?';
  const done = doneFraction(stats);
  if (done <= 0) return '?';
  const elapsed = (performance.now() - startedReading) / 1000;
  const left = Math.max(0, elapsed / done - elapsed);
  return left >= 90 ? `${Math.round(left / 60)}m` : `${Math.round(left)}s`;
}

export function createProgress(mode: ProgressMode, stats: ImportStats, options: { stream?: NodeJS.WritableStream; intervalMs?: number } = {}): Progress {
  const stream = options.stream ?? process.stderr;
  const write = (line: string) => stream.write(`${line}\n`);
  const meter = new RateMeter();
  let shownInvalid = 0;
  let lastRetryShown = 0;
  let fileStarted = performance.now();

  const common: ImportObserver = {
    invalid({ file, line, reason, skipped }) {
      if (mode === 'none') return;
      shownInvalid++;
      if (shownInvalid <= SHOWN_INVALID) log(`${file}:${line}: ${skipped ? 'skipped' : 'invalid'}: ${reason}`);
      else if (shownInvalid === SHOWN_INVALID + 1) log('more invalid records are only counted (--rejects FILE keeps them all)');
    },
    retry({ reason, delayMs, attempt }) {
      if (mode === 'none') return;
      const now = performance.now();
      if (now - lastRetryShown < 2_000) return;
      lastRetryShown = now;
      log(`capture answered ${reason}; retrying in ${(delayMs / 1000).toFixed(1)}s (attempt ${attempt + 1})`);
    },
    note(message) {
      if (mode !== 'none') log(message);
    },
  };

  let log: (line: string) => void = write;
  if (mode === 'bar') {
    const bars = new cliProgress.MultiBar(
      {
        stream,
        format: (_options, params, payload: Record<string, string>) => {
          const width = 24;
          const filled = Math.round(params.progress * width);
          const bar = payload.sized === 'yes' ? `[${'█'.repeat(filled)}${'░'.repeat(width - filled)}] ${Math.floor(params.progress * 100)}% | ` : '';
          return `${payload.file} ${bar}${payload.events} events | ${payload.eps} ev/s | ${payload.mbps} MB/s | ETA ${payload.eta} | ${payload.invalid} invalid | ${payload.retries} retries`;
        },
        hideCursor: true,
        clearOnComplete: false,
        stopOnComplete: false,
        fps: 5,
      },
      cliProgress.Presets.shades_classic,
    );
    let bar: cliProgress.SingleBar | undefined;
    log = (line) => bars.log(`${line}\n`);
    const update = () => {
      if (!bar) return;
      const rate = meter.sample(stats.sent, stats.sentBytes);
      bar.update(stats.fileSize ? Math.round(doneFraction(stats) * stats.fileSize) : 0, {
        file: stats.file,
        sized: stats.fileSize ? 'yes' : 'no',
        events: n(stats.sent),
        eps: n(rate.eventsPerSec),
        mbps: mb(rate.mbPerSec * 1e6),
        eta: eta(stats, fileStarted),
        invalid: n(stats.invalid),
        retries: n(stats.retries),
      });
    };
    const timer = setInterval(update, 200);
    timer.unref();
    return {
      observer: {
        ...common,
        fileStarted(info) {
          fileStarted = performance.now();
          if (bar) update();
          if (info.resumedFrom > 0) log(`${info.file}: resuming (${n(info.resumedFrom)} events acknowledged before)`);
          bar = bars.create(info.size ?? 0, 0, {});
          update();
        },
        fileFinished() {
          update();
        },
      },
      stop() {
        clearInterval(timer);
        update();
        bars.stop();
      },
    };
  }

  if (mode === 'lines') {
    const intervalMs = options.intervalMs ?? 5_000;
    const line = () => {
      const rate = meter.sample(stats.sent, stats.sentBytes);
      const pct = stats.fileSize ? ` ${Math.floor(100 * doneFraction(stats))}%` : '';
      write(
        `import: ${stats.file}${pct} | ${n(stats.sent)} events sent | ${n(rate.eventsPerSec)} ev/s | ${mb(rate.mbPerSec * 1e6)} MB/s | ETA ${eta(stats, fileStarted)} | ` +
          `${n(stats.invalid)} invalid | ${n(stats.retries)} retries`,
      );
    };
    meter.sample(0, 0);
    const timer = setInterval(line, intervalMs);
    timer.unref();
    return {
      observer: {
        ...common,
        fileStarted(info) {
          fileStarted = performance.now();
          write(
            `import: ${info.file} (${info.format}${info.gzip ? ', gzip' : ''}${info.size !== undefined ? `, ${mb(info.size)} MB` : ''}), ${info.lanes} requests in flight` +
              (info.resumedFrom > 0 ? `, resuming after ${n(info.resumedFrom)} acknowledged events` : ''),
          );
        },
      },
      stop() {
        clearInterval(timer);
      },
    };
  }

  return { observer: common, stop() {} };
}
