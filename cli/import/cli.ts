// `spate import FILE… [--url CAPTURE_URL] [--key PROJECT_API_KEY] [options]` (ARCHITECTURE.md, "CLI"):
// argument parsing, where the URL and key come from, signals, the final summary.
import { resolve } from 'node:path';
import type { Readable } from 'node:stream';
import { parseArgs } from 'node:util';
import { clusterFilePath, dataDir, parseByteSize, parseDuration, readClusterFile } from '../../lib/index.js';
import { Importer, type ImportOptions, type ImportResult } from './importer.js';
import { createProgress, type ProgressMode } from './progress.js';

export const IMPORT_USAGE = `usage: spate import FILE… [--url CAPTURE_URL] [--key PROJECT_API_KEY] [options]

Sends historical events to capture's /batch/ with historical_migration: true, in order per
distinct_id, resumably. FILE is NDJSON (one event per line) or a JSON array of events, either
optionally gzipped (told by content, not by name); - reads stdin. Files are imported in order.

  --url URL            capture URL (default: $SPATE_CAPTURE_URL, else captureUrl of
                       $SPATE_DATA_DIR/cluster.json)
  --key KEY            project API key (default: $SPATE_PROJECT_API_KEY, else projectApiKey of
                       cluster.json)
  --checkpoint FILE    progress file (default: ./spate-import.checkpoint.json); re-run the same
                       command after a crash or Ctrl-C to resume
  --restart            forget the files' recorded progress and send them from the start
  --invalid stop|skip  an invalid record (bad JSON, no event name or distinct_id, bad uuid or
                       timestamp, refused by capture) stops the run (default) or is skipped;
                       either way it is reported with its line number and reason
  --rejects FILE       append every invalid record, with line and reason, to FILE (NDJSON)
  --batch-size SIZE    largest request body (default 4MiB, at most 20MiB)
  --concurrency N      requests in flight (default 4); fixed per file once it has progress
  --gzip               gzip request bodies (worth it over a slow network)
  --timeout DURATION   give up on one request after this long and retry it (default 120s)
  --retry-for DURATION keep retrying a batch on 503/429/network errors this long (default 10m)
  --progress MODE      bar | lines | none (default: bar on a terminal, lines otherwise)
  --json               print the summary as JSON

Exit status: 0 imported, 1 stopped on an error (progress saved), 2 bad usage, 130 interrupted.`;

const MAX_BODY = 20 * 1024 * 1024;

export interface ImportIo {
  out: (line: string) => void;
  err: NodeJS.WritableStream;
  env: Readonly<Record<string, string | undefined>>;
  stdin: Readable;
  /** Whether stderr is a terminal (progress bar). */
  isTty: boolean;
  /** Installs SIGINT/SIGTERM handlers; returns their remover. */
  onSignal: (handler: (signal: string) => void) => () => void;
}

const defaultIo = (): ImportIo => ({
  out: (line) => process.stdout.write(line + '\n'),
  err: process.stderr,
  env: process.env,
  stdin: process.stdin,
  isTty: process.stderr.isTTY === true,
  onSignal: (handler) => {
    process.on('SIGINT', handler);
    process.on('SIGTERM', handler);
    return () => {
      process.off('SIGINT', handler);
      process.off('SIGTERM', handler);
    };
  },
});

export class UsageError extends Error {
  override name = 'UsageError';
}

function clusterDefaults(env: ImportIo['env']): { url?: string; key?: string; path: string; problem?: string } {
  const path = clusterFilePath(dataDir(env));
  try {
    const c = readClusterFile(path);
    return { url: c.captureUrl, key: c.projectApiKey, path };
  } catch (err) {
    return { path, problem: (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'missing' : (err as Error).message };
  }
}

/** The /batch/ endpoint from a capture URL given with or without a path. */
export function batchUrlOf(url: string): string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UsageError(`--url is not a URL: ${url}`);
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new UsageError(`--url must be http(s): ${url}`);
  const path = parsed.pathname.replace(/\/+$/, '');
  if (path.endsWith('/batch')) parsed.pathname = `${path}/`;
  else parsed.pathname = `${path}/batch/`;
  return parsed.toString();
}

export function parseImportArgs(args: string[], env: ImportIo['env'], isTty: boolean): Omit<ImportOptions, 'stdin'> & { progress: ProgressMode; json: boolean } {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    strict: true,
    options: {
      url: { type: 'string' },
      key: { type: 'string' },
      checkpoint: { type: 'string' },
      restart: { type: 'boolean', default: false },
      invalid: { type: 'string', default: 'stop' },
      rejects: { type: 'string' },
      'batch-size': { type: 'string', default: '4MiB' },
      concurrency: { type: 'string', default: '4' },
      gzip: { type: 'boolean', default: false },
      timeout: { type: 'string', default: '120s' },
      'retry-for': { type: 'string', default: '10m' },
      linger: { type: 'string', default: '1s' },
      progress: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  if (positionals.length === 0) throw new UsageError('no FILE given (use - for stdin)');
  if (positionals.filter((p) => p === '-').length > 1) throw new UsageError('stdin (-) can be given only once');

  let url = values.url ?? env.SPATE_CAPTURE_URL;
  let key = values.key ?? env.SPATE_PROJECT_API_KEY;
  if (url === undefined || key === undefined) {
    const cluster = clusterDefaults(env);
    url ??= cluster.url;
    key ??= cluster.key;
    if (url === undefined || key === undefined) {
      const missing = [url === undefined ? '--url (or SPATE_CAPTURE_URL)' : '', key === undefined ? '--key (or SPATE_PROJECT_API_KEY)' : ''].filter(Boolean).join(' and ');
      throw new UsageError(`give ${missing}, or start the cluster (npm start) so that ${cluster.path} names them${cluster.problem && cluster.problem !== 'missing' ? ` (${cluster.problem})` : ''}`);
    }
  }
  key = key.trim();
  if (key.length === 0) throw new UsageError('--key is empty');
  if (key.startsWith('phx_')) throw new UsageError('--key is a personal API key (phx_…); events are sent with the project API key (phc_…)');

  if (values.invalid !== 'stop' && values.invalid !== 'skip') throw new UsageError(`--invalid must be stop or skip, not ${values.invalid}`);
  const size = (name: string, text: string) => {
    try {
      return parseByteSize(text);
    } catch {
      throw new UsageError(`${name} must be a size such as 4MiB or 500KB, not ${text}`);
    }
  };
  const duration = (name: string, text: string) => {
    try {
      return parseDuration(text);
    } catch {
      throw new UsageError(`${name} must be a duration such as 30s or 10m, not ${text}`);
    }
  };
  const batchBytes = size('--batch-size', values['batch-size']);
  if (batchBytes < 1024 || batchBytes > MAX_BODY) throw new UsageError(`--batch-size must be between 1KiB and 20MiB (capture's limit), not ${values['batch-size']}`);
  const lanes = Number(values.concurrency);
  if (!Number.isInteger(lanes) || lanes < 1 || lanes > 64) throw new UsageError(`--concurrency must be an integer from 1 to 64, not ${values.concurrency}`);
  const progress = (values.progress ?? (isTty ? 'bar' : 'lines')) as ProgressMode;
  if (!['bar', 'lines', 'none'].includes(progress)) throw new UsageError(`--progress must be bar, lines or none, not ${values.progress}`);
  const requestTimeoutMs = duration('--timeout', values.timeout);
  if (requestTimeoutMs <= 0) throw new UsageError('--timeout must be positive');

  return {
    files: positionals,
    batchUrl: batchUrlOf(url),
    apiKey: key,
    checkpointPath: resolve(values.checkpoint ?? 'spate-import.checkpoint.json'),
    batchBytes,
    lanes,
    invalid: values.invalid,
    restart: values.restart,
    gzip: values.gzip,
    requestTimeoutMs,
    retryForMs: duration('--retry-for', values['retry-for']),
    lingerMs: duration('--linger', values.linger),
    rejectsPath: values.rejects === undefined ? undefined : resolve(values.rejects),
    progress,
    json: values.json,
  };
}

const n = (x: number) => Math.round(x).toLocaleString('en-US');

export function summaryLines(result: ImportResult): string[] {
  const seconds = result.elapsedMs / 1000;
  const lines: string[] = [];
  for (const f of result.files) {
    const what = {
      imported: 'imported',
      'already-imported': 'already imported, nothing sent',
      empty: 'empty',
      partial: 'stopped part-way',
    }[f.outcome];
    lines.push(
      `${f.file}: ${what} — ${n(f.sent)} events sent and acknowledged this run` +
        (f.skipped ? `, ${n(f.skipped)} skipped (acknowledged before)` : '') +
        (f.invalid ? `, ${n(f.invalid)} invalid` : '') +
        `; ${n(f.acknowledgedTotal)} acknowledged in all`,
    );
  }
  lines.push(
    `total: ${n(result.sent)} events in ${seconds.toFixed(1)}s (${n(seconds > 0 ? result.sent / seconds : 0)} events/s, ${(seconds > 0 ? result.sentBytes / seconds / 1e6 : 0).toFixed(1)} MB/s)` +
      `, ${n(result.invalid)} invalid, ${n(result.retries)} retries; checkpoint ${result.checkpoint}`,
  );
  if (result.status === 'failed') lines.push(`stopped: ${result.error?.message ?? 'unknown error'}`, 'progress is saved: fix the cause and run the same command again to resume');
  if (result.status === 'interrupted') lines.push('interrupted: progress is saved; run the same command again to resume');
  return lines;
}

/** Runs `spate import <args>`; returns the exit code. */
export async function runImportCli(args: string[], io: ImportIo = defaultIo()): Promise<number> {
  if (args.includes('--help') || args.includes('-h')) {
    io.out(IMPORT_USAGE);
    return 0;
  }
  let parsed: ReturnType<typeof parseImportArgs>;
  try {
    parsed = parseImportArgs(args, io.env, io.isTty);
  } catch (err) {
    if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      io.err.write(`spate import: ${(err as Error).message}\n\n${IMPORT_USAGE}\n`);
      return 2;
    }
    throw err;
  }
  const { progress: mode, json, ...options } = parsed;
  const importer = new Importer({ ...options, stdin: io.stdin });
  const progress = createProgress(mode, importer.stats, { stream: io.err });
  importer.observe(progress.observer);
  let signals = 0;
  const removeSignals = io.onSignal((signal) => {
    signals++;
    io.err.write(`\n${signal}: ${signals === 1 ? 'finishing requests in flight and saving progress (again to stop at once)' : 'stopping now'}\n`);
    importer.stop(signals === 1 ? 'halt' : 'abort');
  });
  let result: ImportResult;
  try {
    result = await importer.run();
  } finally {
    removeSignals();
    progress.stop();
  }
  if (json) io.out(JSON.stringify(result));
  else for (const line of summaryLines(result)) io.out(line);
  return result.status === 'done' ? 0 : result.status === 'interrupted' ? 130 : 1;
}
