// The batch exports as the admin server publishes them: the KV bucket spate-batch-exports,
// watched (history included, so the first state is complete before the role starts leasing).
import { Kvm, type KV } from '@nats-io/kv';
import { BATCH_EXPORTS_BUCKET, type BatchExportRecord, type Logger, type NatsConnection } from '../../lib/index.js';
import { followBucket } from '../coordination/index.js';

export class ExportCatalog {
  private readonly records = new Map<string, BatchExportRecord>();
  private stopped = false;
  private watcher: { stop(): void } | undefined;
  private readonly listeners = new Set<(exportId: string) => void>();

  private constructor(private readonly logger: Logger) {}

  /**
   * Loads every record and watches the bucket. The admin server creates the bucket (the worker's
   * NATS user may only read it): until it exists, the catalog is empty and keeps looking.
   */
  static open(nc: NatsConnection, logger: Logger): ExportCatalog {
    const catalog = new ExportCatalog(logger);
    void catalog.follow(nc);
    return catalog;
  }

  private async follow(nc: NatsConnection): Promise<void> {
    for (let attempt = 0; !this.stopped; attempt++) {
      try {
        const kv = await new Kvm(nc).open(BATCH_EXPORTS_BUCKET);
        await kv.status();
        await this.followKv(kv);
        return;
      } catch (err) {
        if (attempt % 30 === 0) this.logger.info({ err: String(err) }, `waiting for the KV bucket ${BATCH_EXPORTS_BUCKET} (the admin server creates it)`);
        await new Promise((r) => setTimeout(r, 1_000));
      }
    }
  }

  private async followKv(kv: KV): Promise<void> {
    this.watcher = await followBucket(kv, { put: (key, text) => this.apply(key, text), remove: (key) => this.remove(key) }, { stopped: () => this.stopped, logger: this.logger, what: 'batch exports' });
  }

  private apply(key: string, text: string): void {
    try {
      const record = JSON.parse(text) as BatchExportRecord;
      if (record.id !== key || typeof record.team_id !== 'number') throw new Error('not a batch export record');
      this.records.set(key, record);
      for (const l of this.listeners) l(key);
    } catch (err) {
      this.logger.warn({ key, err: String(err) }, 'batch export record left out: not readable');
    }
  }

  private remove(key: string): void {
    if (!this.records.delete(key)) return;
    for (const l of this.listeners) l(key);
  }

  get(exportId: string): BatchExportRecord | undefined {
    return this.records.get(exportId);
  }

  ids(): string[] {
    return [...this.records.keys()].sort();
  }

  onChange(listener: (exportId: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  stop(): void {
    this.stopped = true;
    this.watcher?.stop();
  }
}
