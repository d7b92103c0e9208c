// Scenario: `spate import` of a generated file into HISTORICAL, run in this process with the
// importer's defaults (4 lanes, 4 MiB batches), for at most durationS. What counts is events
// acknowledged (stored in JetStream) per second; an unfinished import is cut off at the deadline
// with its requests in flight aborted (those are not counted).
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

export async function measureImport(o: { captureUrl: string; key: string; file: string; durationS: number; workDir: string; lanes?: number; batchBytes?: number }): Promise<ImportMeasurement> {
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
  const started = performance.now();
  let cutAt: { events: number; bytes: number; seconds: number } | undefined;
  const deadline = setTimeout(() => {
    const s = importer.stats;
    cutAt = { events: s.sent, bytes: s.sentBytes, seconds: (performance.now() - started) / 1000 };
    importer.stop('abort');
  }, o.durationS * 1000);
  const result = await importer.run();
  clearTimeout(deadline);
  rmSync(checkpointPath, { force: true });
  if (result.status === 'failed') throw new Error(`import failed: ${result.error?.message}`);
  const events = cutAt?.events ?? result.sent;
  const bytes = cutAt?.bytes ?? result.sentBytes;
  const seconds = cutAt?.seconds ?? result.elapsedMs / 1000;
  return { events, seconds, eventsPerSec: events / seconds, mbPerSec: bytes / seconds / 1e6, finished: cutAt === undefined, retries: result.retries };
}
