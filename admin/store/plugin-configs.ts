// Plugin configs: a plugin set up for one project, with its configuration values and its place
// in the project's order. Deleting only disables and hides (the row and its logs stay).
import { isEncryptedSecret } from '../../lib/index.js';
import type { Queryable } from '../db/pool.js';
import { pluginJson, type PluginRow } from './plugins.js';

export interface PluginConfigRow {
  id: number;
  team_id: number;
  plugin_id: number;
  enabled: boolean;
  order: number;
  config: Record<string, unknown>;
  name: string | null;
  description: string | null;
  deleted: boolean;
  created_at: Date;
  updated_at: Date;
  plugin_name: string;
  plugin_description: string;
  plugin_config_schema: unknown;
}

export const SECRET_FIELD_VALUE = '**************** POSTHOG SECRET FIELD ****************';

/** Keys of config_schema fields marked secret (schema as a list of fields or a map of key → field). */
export function secretFields(configSchema: unknown): Set<string> {
  const out = new Set<string>();
  const isSecret = (f: unknown) => typeof f === 'object' && f !== null && (f as { secret?: unknown }).secret === true;
  if (Array.isArray(configSchema)) {
    for (const field of configSchema) {
      const key = (field as { key?: unknown } | null)?.key;
      if (isSecret(field) && typeof key === 'string') out.add(key);
    }
  } else if (typeof configSchema === 'object' && configSchema !== null) {
    for (const [key, field] of Object.entries(configSchema)) if (isSecret(field)) out.add(key);
  }
  return out;
}

/** Secret fields masked; so is any encrypted value (a field the schema no longer marks secret). */
export function maskedConfig(config: Record<string, unknown>, configSchema: unknown): Record<string, unknown> {
  const secrets = secretFields(configSchema);
  const hidden = (k: string, v: unknown) => (secrets.has(k) && v !== null && v !== '') || isEncryptedSecret(v);
  return Object.fromEntries(Object.entries(config).map(([k, v]) => [k, hidden(k, v) ? SECRET_FIELD_VALUE : v]));
}

/** `pluginInfo` is shown on single-config answers, null in lists (as PostHog does). */
export function pluginConfigJson(c: PluginConfigRow, pluginInfo?: PluginRow) {
  return {
    id: c.id,
    plugin: c.plugin_id,
    enabled: c.enabled,
    order: c.order,
    config: maskedConfig(c.config, c.plugin_config_schema),
    // Errors are reported as log entries; Spate keeps no "latest error".
    error: null,
    team_id: c.team_id,
    plugin_info: pluginInfo ? pluginJson(pluginInfo) : null,
    delivery_rate_24h: null,
    created_at: c.created_at.toISOString(),
    updated_at: c.updated_at.toISOString(),
    name: c.name || c.plugin_name,
    description: c.description || c.plugin_description,
    deleted: c.deleted,
  };
}

const COLUMNS = `c.id, c.team_id, c.plugin_id, c.enabled, c."order", c.config, c.name, c.description, c.deleted, c.created_at,
  c.updated_at, p.name as plugin_name, p.description as plugin_description, p.config_schema as plugin_config_schema`;
const FROM = 'plugin_configs c join plugins p on p.id = c.plugin_id';
const ORDER = 'c."order", c.plugin_id, c.id';

export async function listPluginConfigs(
  db: Queryable,
  teamId: number,
  page: { limit: number; offset: number },
): Promise<{ count: number; rows: PluginConfigRow[] }> {
  const count = await db.query<{ count: string }>('select count(*) from plugin_configs where team_id = $1 and not deleted', [teamId]);
  const { rows } = await db.query<PluginConfigRow>(
    `select ${COLUMNS} from ${FROM} where c.team_id = $1 and not c.deleted order by ${ORDER} limit $2 offset $3`,
    [teamId, page.limit, page.offset],
  );
  return { count: Number(count.rows[0]!.count), rows };
}

export async function enabledPluginConfigs(db: Queryable, teamId: number): Promise<PluginConfigRow[]> {
  const { rows } = await db.query<PluginConfigRow>(`select ${COLUMNS} from ${FROM} where c.team_id = $1 and c.enabled order by ${ORDER}`, [teamId]);
  return rows;
}

/** A config of the project (deleted ones included: they can be read and undeleted). */
export async function findPluginConfig(db: Queryable, teamId: number, id: number, lock = false): Promise<PluginConfigRow | undefined> {
  const { rows } = await db.query<PluginConfigRow>(
    `select ${COLUMNS} from ${FROM} where c.team_id = $1 and c.id = $2 ${lock ? 'for no key update of c' : ''}`,
    [teamId, id],
  );
  return rows[0];
}

export interface PluginConfigFields {
  enabled?: boolean;
  order?: number;
  config?: Record<string, unknown>;
  name?: string | null;
  description?: string | null;
  deleted?: boolean;
}

const SETTABLE = ['enabled', 'order', 'config', 'name', 'description', 'deleted'] as const;

function values(fields: PluginConfigFields): { columns: string[]; params: unknown[] } {
  // A deleted config is never enabled.
  const effective = fields.deleted === true ? { ...fields, enabled: false } : fields;
  const columns = SETTABLE.filter((c) => effective[c] !== undefined);
  return { columns, params: columns.map((c) => (c === 'config' ? JSON.stringify(effective.config) : effective[c])) };
}

export async function createPluginConfig(
  db: Queryable,
  teamId: number,
  pluginId: number,
  fields: PluginConfigFields & { order: number },
): Promise<PluginConfigRow> {
  const { columns, params } = values(fields);
  const { rows } = await db.query<{ id: number }>(
    `insert into plugin_configs (team_id, plugin_id, ${columns.map((c) => `"${c}"`).join(', ')})
     values ($1, $2, ${columns.map((_, i) => `$${i + 3}`).join(', ')}) returning id`,
    [teamId, pluginId, ...params],
  );
  return (await findPluginConfig(db, teamId, rows[0]!.id))!;
}

export async function updatePluginConfig(db: Queryable, teamId: number, id: number, fields: PluginConfigFields): Promise<PluginConfigRow> {
  const { columns, params } = values(fields);
  const sets = [...columns.map((c, i) => `"${c}" = $${i + 3}`), 'updated_at = clock_timestamp()'];
  await db.query(`update plugin_configs set ${sets.join(', ')} where team_id = $1 and id = $2`, [teamId, id, ...params]);
  return (await findPluginConfig(db, teamId, id))!;
}

/**
 * Sets the orders of the project's enabled configs named in `orders` (others are ignored) in one
 * transaction the caller holds: every enabled config is locked first, in id order, so concurrent
 * rearranges apply one after the other, never interleaved. Returns what changed.
 */
export async function rearrangePluginConfigs(
  db: Queryable,
  teamId: number,
  orders: ReadonlyMap<number, number>,
): Promise<Array<{ id: number; before: number; after: number; pluginName: string }>> {
  const { rows } = await db.query<{ id: number; order: number; plugin_name: string }>(
    `select c.id, c."order", p.name as plugin_name from ${FROM}
     where c.team_id = $1 and c.enabled order by c.id for no key update of c`,
    [teamId],
  );
  const changes = rows
    .filter((r) => orders.has(r.id) && orders.get(r.id) !== r.order)
    .map((r) => ({ id: r.id, before: r.order, after: orders.get(r.id)!, pluginName: r.plugin_name }));
  if (changes.length > 0) {
    await db.query(
      `update plugin_configs c set "order" = v.o, updated_at = clock_timestamp()
       from unnest($2::int[], $3::int[]) as v(id, o) where c.team_id = $1 and c.id = v.id`,
      [teamId, changes.map((c) => c.id), changes.map((c) => c.after)],
    );
  }
  return changes;
}
