// The exports role's formatting threads (EXPORT_FORMAT_THREADS): S3 JSONLines runs parse and
// format PROCESSED messages there (event-lines.ts), so the event loop only reads the stream and
// feeds zlib and the upload; a run's main-thread work per event was its cap (docs/exports.md,
// "Speed and memory"). Started with the first run that needs them, stopped with the role.
import { Piscina } from 'piscina';
import { runtimeModule } from '../../../lib/index.js';
import { RunStopped } from '../errors.js';
import type { EventLines, EventLinesTask } from './event-lines.js';

export class LinePool {
  private pool: Piscina<EventLinesTask, EventLines> | undefined;
  private closed = false;

  constructor(private readonly threads: number) {}

  format(task: EventLinesTask): Promise<EventLines> {
    if (this.closed) return Promise.reject(new RunStopped('shutdown'));
    if (!this.pool) {
      const entry = runtimeModule(import.meta.url, './event-lines-thread');
      this.pool = new Piscina({
        filename: entry.path,
        execArgv: entry.execArgv,
        minThreads: this.threads,
        maxThreads: this.threads,
        idleTimeout: Number.POSITIVE_INFINITY,
        // A task is one PROCESSED message (a few MiB parsed at most): a thread that grows past
        // this fails its task, and the run is tried again, instead of the worker's memory growing.
        resourceLimits: { maxOldGenerationSizeMb: 128, maxYoungGenerationSizeMb: 16 },
      });
    }
    // The message's own bytes, moved to the thread: msg.data is a view into the NATS client's read
    // buffer (up to a few times the message), which posting as it is would copy whole. A copy of
    // exactly its bytes (not Buffer's slice(), a view of the same memory, which moving would take
    // from the client).
    const data = new Uint8Array(task.data);
    return this.pool.run({ ...task, data }, { transferList: [data.buffer] });
  }

  async close(): Promise<void> {
    this.closed = true;
    const pool = this.pool;
    this.pool = undefined;
    await pool?.destroy();
  }
}
