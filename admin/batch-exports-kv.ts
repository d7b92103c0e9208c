// The NATS KV bucket `spate-batch-exports` (batch export id → BatchExportRecord), kept equal to
// the batch_exports table by a KvMirror; the export runner watches it instead of polling
// PostgreSQL. Deleted exports are removed. The trigger notify_batch_export_change announces
// changed ids on channel `spate_batch_exports`.
import { BATCH_EXPORTS_BUCKET, type Logger, type NatsConnection } from '../lib/index.js';
import type { Pool } from './db/pool.js';
import { KvMirror, type MirrorSpec } from './kv-mirror.js';
import { batchExportRecord, type BatchExportRow } from './store/batch-exports.js';

export const BATCH_EXPORTS_CHANNEL = 'spate_batch_exports';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

async function records(pool: Pool, ids: readonly string[] | undefined): Promise<Map<string, string>> {
  const { rows } = await pool.query<BatchExportRow>(
    `select id, team_id, name, model, destination_type, destination_config, "interval", paused, last_paused_at,
       start_at, end_at, hogql_query, created_at, last_updated_at
     from batch_exports where not deleted ${ids ? 'and id = any($1::uuid[])' : ''}`,
    ids ? [ids.filter((id) => UUID.test(id))] : [],
  );
  return new Map(rows.map((r) => [r.id, JSON.stringify(batchExportRecord(r))]));
}

export const batchExportsMirror: MirrorSpec = {
  bucket: BATCH_EXPORTS_BUCKET,
  channel: BATCH_EXPORTS_CHANNEL,
  load: (pool, ids) => records(pool, ids),
  loadAll: (pool) => records(pool, undefined),
};

export function openBatchExportsKv(nc: NatsConnection, pool: Pool, log: Logger, replicas = 1): Promise<KvMirror> {
  return KvMirror.open(nc, batchExportsMirror, pool, log, replicas);
}
