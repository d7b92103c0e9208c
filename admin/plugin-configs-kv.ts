// The NATS KV bucket `spate-plugin-configs` (project id → the project's enabled plugin configs,
// in order), kept equal to the plugin_configs table by a KvMirror; plugin workers watch it. A
// project without enabled configs has no key. Triggers on plugin_configs and plugins announce
// changed project ids on channel `spate_plugin_configs`.
import { PLUGIN_CONFIGS_BUCKET, type Logger, type NatsConnection, type PluginConfigsRecord } from '../lib/index.js';
import type { Pool } from './db/pool.js';
import { KvMirror, type MirrorSpec } from './kv-mirror.js';

export const PLUGIN_CONFIGS_CHANNEL = 'spate_plugin_configs';

interface Row {
  id: number;
  team_id: number;
  plugin_id: number;
  order: number;
  config: Record<string, unknown>;
  updated_at: Date;
  name: string;
  plugin_type: string;
  url: string | null;
  tag: string | null;
  capabilities: Record<string, unknown>;
  plugin_updated_at: Date;
  source_hash: string | null;
}

async function records(pool: Pool, teamIds: readonly string[] | undefined): Promise<Map<string, string>> {
  const ids = teamIds?.filter((k) => /^\d{1,10}$/.test(k) && Number(k) <= 2_147_483_647).map(Number);
  const { rows } = await pool.query<Row>(
    `select c.id, c.team_id, c.plugin_id, c."order", c.config, c.updated_at, p.name, p.plugin_type, p.url, p.tag,
       p.capabilities, p.updated_at as plugin_updated_at, p.source_hash
     from plugin_configs c join plugins p on p.id = c.plugin_id
     where c.enabled ${ids ? 'and c.team_id = any($1::int[])' : ''}
     order by c.team_id, c."order", c.plugin_id, c.id`,
    ids ? [ids] : [],
  );
  const byTeam = new Map<number, PluginConfigsRecord>();
  for (const r of rows) {
    let record = byTeam.get(r.team_id);
    if (!record) byTeam.set(r.team_id, (record = { team_id: r.team_id, configs: [] }));
    record.configs.push({
      id: r.id,
      plugin_id: r.plugin_id,
      order: r.order,
      config: r.config,
      plugin: {
        name: r.name,
        plugin_type: r.plugin_type,
        url: r.url,
        tag: r.tag,
        capabilities: r.capabilities,
        updated_at: r.plugin_updated_at.toISOString(),
        source_hash: r.source_hash,
      },
      updated_at: r.updated_at.toISOString(),
    });
  }
  return new Map([...byTeam].map(([team, record]) => [String(team), JSON.stringify(record)]));
}

export const pluginConfigsMirror: MirrorSpec = {
  bucket: PLUGIN_CONFIGS_BUCKET,
  channel: PLUGIN_CONFIGS_CHANNEL,
  load: (pool, teamIds) => records(pool, teamIds),
  loadAll: (pool) => records(pool, undefined),
};

export function openPluginConfigsKv(nc: NatsConnection, pool: Pool, log: Logger, replicas = 1): Promise<KvMirror> {
  return KvMirror.open(nc, pluginConfigsMirror, pool, log, replicas);
}
