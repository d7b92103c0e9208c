// Plugins: one record shared by the four pipeline collections, owned by an organization. An
// organization sees its own plugins, global ones, and those its projects have configs of.
import { compilePluginSource, PLUGIN_ENTRY_FILES, PluginSourceError, type CompiledPluginSource, type Logger } from '../../lib/index.js';
import type { Queryable } from '../db/pool.js';
import type { PluginKind } from '../plugin-kinds.js';

export interface PluginRow {
  id: number;
  organization_id: string;
  organization_name: string;
  kind: PluginKind;
  plugin_type: string;
  name: string;
  description: string;
  url: string | null;
  icon: string | null;
  config_schema: unknown;
  tag: string | null;
  latest_tag: string | null;
  is_global: boolean;
  capabilities: Record<string, unknown>;
  metrics: unknown;
  public_jobs: unknown;
  created_at: Date;
  updated_at: Date;
  /** SHA-256 of its compiled code (spate-plugin-sources); null when it has none. */
  source_hash: string | null;
}

export function pluginJson(p: PluginRow) {
  return {
    id: p.id,
    plugin_type: p.plugin_type,
    name: p.name,
    description: p.description,
    // A private token in the query string of a repository URL is never shown.
    url: p.url ? p.url.split('?')[0]! : null,
    icon: p.icon,
    config_schema: p.config_schema,
    tag: p.tag,
    latest_tag: p.latest_tag,
    is_global: p.is_global,
    organization_id: p.organization_id,
    organization_name: p.organization_name,
    capabilities: p.capabilities,
    metrics: p.metrics,
    public_jobs: p.public_jobs,
    // Spate has no hog functions to migrate plugins to.
    hog_function_migration_available: false,
  };
}

const COLUMNS = `p.id, p.organization_id, o.name as organization_name, p.kind, p.plugin_type, p.name, p.description, p.url, p.icon,
  p.config_schema, p.tag, p.latest_tag, p.is_global, p.capabilities, p.metrics, p.public_jobs, p.created_at, p.updated_at, p.source_hash`;

const FROM = 'plugins p join organizations o on o.id = p.organization_id';

/** Plugins organization $1 may see. */
const VISIBLE = `(p.organization_id = $1 or p.is_global or p.id in (
    select c.plugin_id from plugin_configs c join projects t on t.id = c.team_id
    where t.organization_id = $1 and not c.deleted))`;

export async function listPlugins(
  db: Queryable,
  organizationId: string,
  kind: PluginKind,
  page: { limit: number; offset: number },
): Promise<{ count: number; rows: PluginRow[] }> {
  const where = `p.kind = $2 and ${VISIBLE}`;
  const count = await db.query<{ count: string }>(`select count(*) from ${FROM} where ${where}`, [organizationId, kind]);
  const { rows } = await db.query<PluginRow>(`select ${COLUMNS} from ${FROM} where ${where} order by p.id limit $3 offset $4`, [
    organizationId,
    kind,
    page.limit,
    page.offset,
  ]);
  return { count: Number(count.rows[0]!.count), rows };
}

/** The plugin of this collection, if organization $1 may see it. */
export async function findPlugin(
  db: Queryable,
  organizationId: string,
  kind: PluginKind,
  id: number,
  lock = false,
): Promise<PluginRow | undefined> {
  const { rows } = await db.query<PluginRow>(
    `select ${COLUMNS} from ${FROM} where p.kind = $2 and p.id = $3 and ${VISIBLE} ${lock ? 'for no key update of p' : ''}`,
    [organizationId, kind, id],
  );
  return rows[0];
}

/** A plugin a project of organization $1 may configure: its own or a global one (any collection). */
export async function findConfigurablePlugin(db: Queryable, organizationId: string, id: number): Promise<PluginRow | undefined> {
  const { rows } = await db.query<PluginRow>(
    `select ${COLUMNS} from ${FROM} where p.id = $2 and (p.organization_id = $1 or p.is_global)`,
    [organizationId, id],
  );
  return rows[0];
}

export async function getPlugin(db: Queryable, id: number): Promise<PluginRow> {
  const { rows } = await db.query<PluginRow>(`select ${COLUMNS} from ${FROM} where p.id = $1`, [id]);
  if (!rows[0]) throw new Error(`plugin ${id} not found`);
  return rows[0];
}

export interface PluginFields {
  plugin_type?: string;
  name?: string;
  description?: string;
  icon?: string | null;
  config_schema?: unknown;
  tag?: string | null;
  is_global?: boolean;
  capabilities?: Record<string, unknown>;
  metrics?: unknown;
  public_jobs?: unknown;
  latest_tag?: string | null;
}

const SETTABLE = [
  'plugin_type',
  'name',
  'description',
  'icon',
  'config_schema',
  'tag',
  'is_global',
  'capabilities',
  'metrics',
  'public_jobs',
  'latest_tag',
] as const;
const JSON_COLUMNS = new Set(['config_schema', 'capabilities', 'metrics', 'public_jobs']);

function values(fields: PluginFields): { columns: string[]; params: unknown[] } {
  const columns = SETTABLE.filter((c) => fields[c] !== undefined);
  return { columns, params: columns.map((c) => (JSON_COLUMNS.has(c) ? JSON.stringify(fields[c]) : fields[c])) };
}

export async function createPlugin(
  db: Queryable,
  organizationId: string,
  kind: PluginKind,
  fields: PluginFields & { plugin_type: string; name: string },
): Promise<PluginRow> {
  const { columns, params } = values(fields);
  const { rows } = await db.query<{ id: number }>(
    `insert into plugins (organization_id, kind, ${columns.join(', ')})
     values ($1, $2, ${columns.map((_, i) => `$${i + 3}`).join(', ')}) returning id`,
    [organizationId, kind, ...params],
  );
  return getPlugin(db, rows[0]!.id);
}

export async function updatePlugin(db: Queryable, id: number, fields: PluginFields): Promise<PluginRow> {
  const { columns, params } = values(fields);
  const sets = [...columns.map((c, i) => `${c} = $${i + 2}`), 'updated_at = clock_timestamp()'];
  await db.query(`update plugins set ${sets.join(', ')} where id = $1`, [id, ...params]);
  return getPlugin(db, id);
}

/**
 * Configs of the plugin in projects of other organizations (it was global when they set it up).
 * Deleting the plugin would delete them too.
 */
export async function configsInOtherOrganizations(db: Queryable, pluginId: number, organizationId: string): Promise<number> {
  // A config being created holds a key-share lock on its plugin (the foreign key), which only
  // FOR UPDATE waits for: every config is either counted here or waits for this transaction.
  await db.query('select 1 from plugins where id = $1 for update', [pluginId]);
  const { rows } = await db.query<{ n: number }>(
    `select count(*)::int as n from plugin_configs c join projects t on t.id = c.team_id
     where c.plugin_id = $1 and t.organization_id <> $2 and not c.deleted`,
    [pluginId, organizationId],
  );
  return rows[0]!.n;
}

export async function deletePlugin(db: Queryable, id: number): Promise<void> {
  await db.query('delete from plugins where id = $1', [id]);
}

export async function pluginSourceFiles(db: Queryable, pluginId: number): Promise<Map<string, string>> {
  const { rows } = await db.query<{ filename: string; source: string }>(
    'select filename, source from plugin_source_files where plugin_id = $1 order by filename',
    [pluginId],
  );
  return new Map(rows.map((r) => [r.filename, r.source]));
}

/** Writes files (null deletes one); returns the names that changed. */
export async function writePluginSourceFiles(db: Queryable, pluginId: number, files: Record<string, string | null>): Promise<string[]> {
  const current = await pluginSourceFiles(db, pluginId);
  const changed: string[] = [];
  for (const [filename, source] of Object.entries(files)) {
    if (source === null) {
      if (!current.has(filename)) continue;
      await db.query('delete from plugin_source_files where plugin_id = $1 and filename = $2', [pluginId, filename]);
    } else {
      if (current.get(filename) === source) continue;
      await db.query(
        `insert into plugin_source_files (plugin_id, filename, source) values ($1, $2, $3)
         on conflict (plugin_id, filename) do update set source = excluded.source, updated_at = clock_timestamp()`,
        [pluginId, filename, source],
      );
    }
    changed.push(filename);
  }
  return changed;
}

/** Records a plugin's compiled code (undefined: it has none); true when it changed. */
export async function setCompiledSource(db: Queryable, pluginId: number, compiled: CompiledPluginSource | undefined): Promise<boolean> {
  const { rowCount } = await db.query(
    `update plugins set source_file = $2, source_hash = $3, compiled_source = $4
     where id = $1 and source_hash is distinct from $3`,
    [pluginId, compiled?.file ?? null, compiled?.hash ?? null, compiled?.code ?? null],
  );
  return (rowCount ?? 0) > 0;
}

/**
 * Compiles the code of plugins saved before sources were compiled (or by a version that did not
 * compile them): they run once this is done. A source that does not compile is logged and left
 * without code, as update_source would have refused it.
 */
export async function compileStoredSources(db: Queryable, log: Logger): Promise<number> {
  const { rows } = await db.query<{ id: number }>(
    `select distinct p.id from plugins p join plugin_source_files f on f.plugin_id = p.id
     where p.source_hash is null and f.filename = any($1::text[]) order by p.id`,
    [[...PLUGIN_ENTRY_FILES]],
  );
  let compiled = 0;
  for (const { id } of rows) {
    try {
      if (await setCompiledSource(db, id, await compilePluginSource(await pluginSourceFiles(db, id)))) compiled++;
    } catch (err) {
      if (!(err instanceof PluginSourceError)) throw err;
      log.warn({ pluginId: id, err: err.message }, 'stored plugin source does not compile: the plugin has no code until it is saved again');
    }
  }
  return compiled;
}
