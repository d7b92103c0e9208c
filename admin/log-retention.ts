// Deletes plugin and batch export log entries older than LOG_RETENTION, hourly and in small
// chunks (a large backlog never holds long locks or one huge transaction). Every replica may run
// it; the deletes are idempotent.
import type { Logger } from '../lib/index.js';
import type { Pool } from './db/pool.js';

const CHUNK = 10_000;
const EVERY_MS = 3_600_000;
const TABLES = ['plugin_log_entries', 'batch_export_log_entries'] as const;

/** Deletes entries older than `retentionMs`; returns how many. */
export async function deleteOldLogEntries(pool: Pool, retentionMs: number): Promise<number> {
  const cutoff = new Date(Date.now() - retentionMs);
  let total = 0;
  for (const table of TABLES) {
    for (;;) {
      const { rowCount } = await pool.query(
        `delete from ${table} where id in (select id from ${table} where timestamp < $1 limit ${CHUNK})`,
        [cutoff],
      );
      total += rowCount ?? 0;
      if ((rowCount ?? 0) < CHUNK) break;
    }
  }
  return total;
}

export class LogRetention {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();

  constructor(
    private readonly pool: Pool,
    private readonly retentionMs: number,
    private readonly log: Logger,
  ) {}

  start(): void {
    if (this.retentionMs <= 0) return;
    const run = () => {
      this.running = deleteOldLogEntries(this.pool, this.retentionMs).then(
        (deleted) => {
          if (deleted > 0) this.log.info({ deleted }, 'deleted log entries past LOG_RETENTION');
        },
        (err: unknown) => this.log.warn({ err }, 'could not delete old log entries'),
      );
    };
    run();
    this.timer = setInterval(run, EVERY_MS);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }
}
