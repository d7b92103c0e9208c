// Plugin log entries as workers wrote them (through PLUGIN_LOGS), newest first.
import type { Queryable } from '../db/pool.js';

export interface PluginLogRow {
  id: string;
  team_id: number;
  plugin_id: number;
  plugin_config_id: number;
  timestamp: Date;
  source: string;
  type: string;
  message: string;
  instance_id: string | null;
}

export function pluginLogJson(r: PluginLogRow) {
  return {
    id: r.id,
    team_id: r.team_id,
    plugin_id: r.plugin_id,
    plugin_config_id: r.plugin_config_id,
    timestamp: r.timestamp.toISOString(),
    source: r.source,
    type: r.type,
    message: r.message,
    instance_id: r.instance_id,
  };
}

export interface PluginLogFilters {
  /** Only these types (none: every type). */
  types: readonly string[];
  /** Case-insensitive substring of the message. */
  search: string | null;
  after: Date | null;
  before: Date | null;
}

/** `text` as a LIKE pattern that matches it literally anywhere. */
export function containsPattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

export async function listPluginLogs(
  db: Queryable,
  pluginConfigId: number,
  filters: PluginLogFilters,
  page: { limit: number; offset: number },
): Promise<{ count: number; rows: PluginLogRow[] }> {
  const where = `plugin_config_id = $1
    and (cardinality($2::text[]) = 0 or type = any($2::text[]))
    and ($3::text is null or message ilike $3)
    and ($4::timestamptz is null or timestamp > $4)
    and ($5::timestamptz is null or timestamp < $5)`;
  const values = [pluginConfigId, filters.types, filters.search === null ? null : containsPattern(filters.search), filters.after, filters.before];
  const count = await db.query<{ count: string }>(`select count(*) from plugin_log_entries where ${where}`, values);
  const { rows } = await db.query<PluginLogRow>(
    `select id, team_id, plugin_id, plugin_config_id, timestamp, source, type, message, instance_id
     from plugin_log_entries where ${where} order by timestamp desc, id desc limit $6 offset $7`,
    [...values, page.limit, page.offset],
  );
  return { count: Number(count.rows[0]!.count), rows };
}
