// The NATS KV bucket `spate-plugin-sources` (SHA-256 of a plugin's compiled code → the code),
// kept equal to the compiled sources of the plugins table by a KvMirror: plugin workers fetch the
// code the configs' records name (plugin.source_hash). A hash no plugin uses any more is removed.
// The trigger notify_plugin_source_change announces hashes on channel `spate_plugin_sources`.
import { PLUGIN_SOURCES_BUCKET, type Logger, type NatsConnection } from '../lib/index.js';
import type { Pool } from './db/pool.js';
import { KvMirror, type MirrorSpec } from './kv-mirror.js';

export const PLUGIN_SOURCES_CHANNEL = 'spate_plugin_sources';

const HASH = /^[0-9a-f]{64}$/;

async function sources(pool: Pool, hashes: readonly string[] | undefined): Promise<Map<string, string>> {
  const { rows } = await pool.query<{ source_hash: string; compiled_source: string }>(
    `select distinct on (source_hash) source_hash, compiled_source from plugins
     where source_hash is not null ${hashes ? 'and source_hash = any($1::text[])' : ''}
     order by source_hash`,
    hashes ? [hashes.filter((h) => HASH.test(h))] : [],
  );
  return new Map(rows.map((r) => [r.source_hash, r.compiled_source]));
}

export const pluginSourcesMirror: MirrorSpec = {
  bucket: PLUGIN_SOURCES_BUCKET,
  channel: PLUGIN_SOURCES_CHANNEL,
  load: (pool, hashes) => sources(pool, hashes),
  loadAll: (pool) => sources(pool, undefined),
};

export function openPluginSourcesKv(nc: NatsConnection, pool: Pool, log: Logger, replicas = 1): Promise<KvMirror> {
  return KvMirror.open(nc, pluginSourcesMirror, pool, log, replicas);
}
