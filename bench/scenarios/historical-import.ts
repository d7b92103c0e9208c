// Scenario: `spate import` of a generated file into HISTORICAL, run in this process with the
// importer's defaults (4 lanes, 4 MiB batches), for at most durationS. What counts is events
// acknowledged (stored in JetStream) per second, sustained: counted from the end of a warm-up
// (the first round of batches is read and sent before any answer can come back) to the deadline
// or the end of the file. An unfinished import is cut off at the deadline with its requests in
// flight aborted (those are not counted).
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { Importer } from '../../cli/import/index.js';

export interface ImportMeasurement {
  events: number;
  seconds: number;
  eventsPerSec: number;
  /** Request body megabytes (10^6) acknowledged per second. */
  mbPerSec: number;
  finished: boolean;
  retries: number;
}

export async function measureImport(o: { captureUrl: string; key: string; file: string; durationS: number; warmupS: number; workDir: string; lanes?: number; batchBytes?: number; signal?: AbortSignal }): Promise<ImportMeasurement> {
  o.signal?.throwIfAborted();
  const checkpointPath = join(o.workDir, `import-checkpoint-${process.hrtime.bigint()}.json`);
  const importer = new Importer({
    files: [o.file],
    batchUrl: `${o.captureUrl}/batch/`,
    apiKey: o.key,
    checkpointPath,
    batchBytes: o.batchBytes ?? 4 * 1024 * 1024,
    lanes: o.lanes ?? 4,
    invalid: 'stop',
    restart: true,
    gzip: false,
    requestTimeoutMs: 120_000,
    retryForMs: 60_000,
    lingerMs: 1000,
  });
  const sample = () => ({ events: importer.stats.sent, bytes: importer.stats.sentBytes, at: performance.now() });
  const started = sample();
  let warm = started;
  let cut: ReturnType<typeof sample> | undefined;
  const warmup = setTimeout(() => (warm = sample()), o.warmupS * 1000);
  const deadline = setTimeout(() => {
    cut = sample();
    importer.stop('abort');
  }, o.durationS * 1000);
  // A stage that overran stops its import like the deadline does.
  const abort = () => importer.stop('abort');
  o.signal?.addEventListener('abort', abort, { once: true });
  const result = await importer.run().finally(() => o.signal?.removeEventListener('abort', abort));
  const finished = cut === undefined;
  const end = cut ?? sample();
  clearTimeout(warmup);
  clearTimeout(deadline);
  rmSync(checkpointPath, { force: true });
  if (result.status === 'failed') throw new Error(`import failed: ${result.error?.message}`);
  const from = end.at - warm.at > 500 ? warm : started; // a file done within the warm-up: its whole run
  const events = end.events - from.events;
  const seconds = (end.at - from.at) / 1000;
  return { events, seconds, eventsPerSec: events / seconds, mbPerSec: (end.bytes - from.bytes) / seconds / 1e6, finished, retries: result.retries };
}
