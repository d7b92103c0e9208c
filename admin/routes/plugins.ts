// /api/organizations/:organization_id/<collection>/ for the four pipeline collections
// (pipeline_destinations, pipeline_frontend_apps, pipeline_import_apps, pipeline_transformations).
// One plugin record; a plugin belongs to the collection it was created in and its capabilities
// agree. The organization's plugins_access_level gates everything: reading needs 3, changing 6,
// global plugins 9. Transformations have no delete and no sub-endpoints but update_source (their
// code must reach the workers too).
import type { z } from 'zod';
import { compilePluginSource, PluginSourceError, unsafePluginFileName } from '../../lib/index.js';
import { inTransaction, type Queryable } from '../db/pool.js';
import { apiError, notFound } from '../errors.js';
import { paginate, pageOf } from '../http/pagination.js';
import { defineRoute, type Principal, type Route } from '../http/route.js';
import { unstorableJson } from '../http/validation.js';
import {
  paginatedPlugins,
  pluginCreate,
  pluginPath,
  pluginSchema,
  pluginSourceUpdate,
  pluginUpdate,
} from '../pipeline-schemas.js';
import {
  capabilitiesFit,
  DEFAULT_CAPABILITIES,
  KIND_NAMES,
  kindsOf,
  PLUGIN_COLLECTIONS,
  PLUGIN_KINDS,
  type PluginCollection,
  type PluginKind,
} from '../plugin-kinds.js';
import { organizationChildPath } from '../schemas.js';
import { sealStoredSecrets } from '../secrets-at-rest.js';
import type { Services } from '../services.js';
import { changesBetween, logActivity } from '../store/activity.js';
import type { OrganizationAccess } from '../store/organizations.js';
import {
  configsInOtherOrganizations,
  createPlugin,
  deletePlugin,
  findPlugin,
  listPlugins,
  pluginJson,
  updatePlugin,
  writePluginSourceFiles,
  pluginSourceFiles,
  setCompiledSource,
  type PluginFields,
  type PluginRow,
} from '../store/plugins.js';
import { organizationOr404, PLUGINS_ACCESS, pluginsAccessLevel } from './common.js';

const INSUFFICIENT = "Your organization's plugin access level is insufficient.";
const PLUGIN_FIELDS = ['plugin_type', 'name', 'description', 'icon', 'config_schema', 'tag', 'is_global', 'capabilities', 'metrics', 'public_jobs'];

/** The organization, if visible and its plugins_access_level allows reading (3) or changing (6) plugins. */
async function pluginOrganization(db: Queryable, principal: Principal, ref: string, need: 'read' | 'write') {
  const org = await organizationOr404(db, principal, ref);
  const level = await pluginsAccessLevel(db, org.id);
  if (level < (need === 'read' ? PLUGINS_ACCESS.config : PLUGINS_ACCESS.install)) throw apiError('permission_denied', INSUFFICIENT);
  return { org, level };
}

/**
 * A plugin the caller may change: it must be visible in this collection (else 404) and owned by
 * the organization (global plugins of others answer 403 for updates and deletes, 404 for the
 * source and upgrade actions, as PostHog does).
 */
async function ownPlugin(db: Queryable, org: OrganizationAccess, kind: PluginKind, id: number, foreign: 'forbidden' | 'not_found'): Promise<PluginRow> {
  const plugin = await findPlugin(db, org.id, kind, id, true);
  if (!plugin) throw notFound();
  if (plugin.organization_id !== org.id) {
    if (foreign === 'not_found') throw notFound();
    throw apiError('permission_denied', 'This plugin installation is managed by another organization');
  }
  return plugin;
}

function checkCapabilities(kind: PluginKind, collection: PluginCollection, capabilities: Record<string, unknown>): void {
  if (capabilitiesFit(kind, capabilities)) return;
  const actual = kindsOf(capabilities).map((k) => KIND_NAMES[k]);
  const what = actual.length === 0 ? 'no pipeline collection' : actual.join(' and ');
  throw apiError(
    'validation_error',
    `These capabilities make the plugin ${what}, not ${KIND_NAMES[kind]} (${collection}).`,
    'capabilities',
  );
}

function checkGlobal(fields: { is_global?: boolean }, level: number): void {
  if (fields.is_global !== undefined && level < PLUGINS_ACCESS.root) throw apiError('permission_denied', "This organization can't manage global plugins!");
}

/** Projects whose enabled configs use the plugin (their KV records show it). */
async function teamsUsing(db: Queryable, pluginId: number): Promise<string[]> {
  const { rows } = await db.query<{ team_id: number }>('select distinct team_id from plugin_configs where plugin_id = $1 and enabled', [pluginId]);
  return rows.map((r) => String(r.team_id));
}

function pluginFields(input: z.output<typeof pluginUpdate>): PluginFields {
  return {
    plugin_type: input.plugin_type,
    name: input.name,
    description: input.description,
    icon: input.icon,
    config_schema: input.config_schema,
    tag: input.tag,
    is_global: input.is_global,
    capabilities: input.capabilities,
    metrics: input.metrics,
    public_jobs: input.public_jobs,
  };
}

/** PATCH and upgrade: the body's fields applied to an own plugin. */
async function applyUpdate(
  services: Services,
  principal: Principal,
  params: { organization_id: string; id: number },
  collection: PluginCollection,
  body: <T extends z.ZodType>(schema: T) => z.output<T>,
  activity: 'updated' | 'upgraded',
): Promise<PluginRow> {
  const kind = PLUGIN_KINDS[collection];
  const { updated, teams } = await inTransaction(services.pool, async (db) => {
    const { org, level } = await pluginOrganization(db, principal, params.organization_id, 'write');
    const current = await ownPlugin(db, org, kind, params.id, activity === 'upgraded' ? 'not_found' : 'forbidden');
    const input = body(pluginUpdate);
    checkGlobal(input, level);
    if (input.capabilities) checkCapabilities(kind, collection, input.capabilities);
    let updated = await updatePlugin(db, current.id, pluginFields(input));
    // Fields the new config_schema marks secret are encrypted in every config of the plugin.
    if (input.config_schema !== undefined) await sealStoredSecrets(db, services.secrets, services.log, { pluginId: current.id });
    if (activity === 'upgraded') {
      // Nothing to download: the installed tag is now the latest one.
      await db.query('update plugins set latest_tag = tag, latest_tag_checked_at = clock_timestamp() where id = $1', [current.id]);
      updated = { ...updated, latest_tag: updated.tag };
    }
    const changes = changesBetween(pluginJson(current), pluginJson(updated), PLUGIN_FIELDS);
    if (changes.length > 0 || activity === 'upgraded') {
      await logActivity(db, { organizationId: org.id, userId: principal.userId, scope: 'Plugin', itemId: current.id, activity, name: updated.name, changes });
    }
    return { updated, teams: await teamsUsing(db, current.id) };
  });
  await services.pluginConfigsKv.sync(teams);
  return updated;
}

const emptyOk = { status: 200 as const, description: 'Empty body' };

function collectionRoutes(collection: PluginCollection): Route[] {
  const kind = PLUGIN_KINDS[collection];
  const base = `/api/organizations/:organization_id/${collection}/`;
  const tag = collection;
  const op = (name: string) => `${collection}_${name}`;

  const routes: Route[] = [
    defineRoute({
      method: 'GET',
      path: base,
      scope: 'plugin:read',
      operationId: op('list'),
      summary: `List the plugins of this collection the organization can use (its own, global ones, and those its projects configured)`,
      tag,
      params: organizationChildPath,
      paginated: true,
      response: { status: 200, description: 'A page of plugins', schema: paginatedPlugins },
      errors: [403],
      async handler({ principal, params, query, url, services }) {
        const { org } = await pluginOrganization(services.pool, principal, params.organization_id, 'read');
        const page = pageOf(query);
        const { count, rows } = await listPlugins(services.pool, org.id, kind, page);
        return { status: 200, body: paginate(url, page, count, rows.map(pluginJson)) };
      },
    }),

    defineRoute({
      method: 'POST',
      path: base,
      scope: 'plugin:write',
      operationId: op('create'),
      summary: `Install a plugin in this collection (its capabilities must agree with it)`,
      tag,
      params: organizationChildPath,
      requestBody: pluginCreate,
      response: { status: 201, description: 'The new plugin', schema: pluginSchema },
      errors: [403],
      async handler({ principal, params, body, services }) {
        const plugin = await inTransaction(services.pool, async (db) => {
          const { org, level } = await pluginOrganization(db, principal, params.organization_id, 'write');
          const input = body(pluginCreate);
          checkGlobal(input.is_global ? input : {}, level);
          const capabilities = input.capabilities ?? DEFAULT_CAPABILITIES[kind];
          checkCapabilities(kind, collection, capabilities);
          const created = await createPlugin(db, org.id, kind, {
            ...pluginFields(input),
            plugin_type: input.plugin_type ?? 'custom',
            name: input.name ?? 'Untitled plugin',
            capabilities,
          });
          await logActivity(db, { organizationId: org.id, userId: principal.userId, scope: 'Plugin', itemId: created.id, activity: 'installed', name: created.name });
          return created;
        });
        return { status: 201, body: pluginJson(plugin) };
      },
    }),

    defineRoute({
      method: 'GET',
      path: `${base}:id/`,
      scope: 'plugin:read',
      operationId: op('retrieve'),
      summary: 'Retrieve a plugin',
      tag,
      params: pluginPath,
      response: { status: 200, description: 'The plugin', schema: pluginSchema },
      errors: [403],
      async handler({ principal, params, services }) {
        const { org } = await pluginOrganization(services.pool, principal, params.organization_id, 'read');
        const plugin = await findPlugin(services.pool, org.id, kind, params.id);
        if (!plugin) throw notFound();
        return { status: 200, body: pluginJson(plugin) };
      },
    }),

    defineRoute({
      method: 'PATCH',
      path: `${base}:id/`,
      scope: 'plugin:write',
      operationId: op('partial_update'),
      summary: "Update one of the organization's plugins (is_global needs plugins_access_level 9)",
      tag,
      params: pluginPath,
      requestBody: pluginUpdate,
      response: { status: 200, description: 'The updated plugin', schema: pluginSchema },
      errors: [403],
      async handler({ principal, params, body, services }) {
        const plugin = await applyUpdate(services, principal, params, collection, body, 'updated');
        return { status: 200, body: pluginJson(plugin) };
      },
    }),
    defineRoute({
      method: 'PATCH',
      path: `${base}:id/update_source/`,
      scope: 'plugin:write',
      operationId: op('update_source'),
      summary:
        'Store source files ({"<file name>": "<source>" or null to delete}; safe relative names). index.ts (or index.js) is compiled when saved: one that does not compile is refused with 400, its file in attr and its line in detail; the compiled code reaches the workers. A plugin.json name and config are copied onto the plugin. Empty body.',
      tag,
      params: pluginPath,
      requestBody: pluginSourceUpdate,
      response: emptyOk,
      errors: [403],
      async handler({ principal, params, body, services }) {
        const { teams, hashes } = await inTransaction(services.pool, async (db) => {
          const { org } = await pluginOrganization(db, principal, params.organization_id, 'write');
          const plugin = await ownPlugin(db, org, kind, params.id, 'not_found');
          const files = body(pluginSourceUpdate);
          for (const name of Object.keys(files)) {
            const unsafe = unsafePluginFileName(name);
            if (unsafe) throw apiError('validation_error', `${JSON.stringify(name)} is not a safe file name: ${unsafe}.`, name);
          }
          const changed = await writePluginSourceFiles(db, plugin.id, files);
          const stored = await pluginSourceFiles(db, plugin.id);
          // Compiled now, so a source that does not compile is refused with its line, never
          // found on a worker (lib/plugin-source.ts).
          const compiled = await compilePluginSource(stored).catch((err: unknown) => {
            if (err instanceof PluginSourceError) throw apiError('validation_error', err.message, err.file);
            throw err;
          });
          const recompiled = await setCompiledSource(db, plugin.id, compiled);
          const manifest = stored.get('plugin.json');
          const fields: PluginFields = {};
          if (manifest !== undefined) {
            let parsed: unknown;
            try {
              parsed = JSON.parse(manifest);
            } catch (err) {
              throw apiError('validation_error', `plugin.json is not valid JSON: ${(err as Error).message}`, 'plugin.json');
            }
            if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
              throw apiError('validation_error', 'plugin.json must be a JSON object.', 'plugin.json');
            }
            // Escapes like \u0000 pass as text but not once parsed into the plugin's columns.
            const unstorable = unstorableJson(parsed);
            if (unstorable) throw apiError('validation_error', `plugin.json: ${unstorable.message}`, 'plugin.json');
            const { name, config } = parsed as { name?: unknown; config?: unknown };
            if (typeof name === 'string' && name.trim() !== '' && name !== plugin.name) fields.name = name.slice(0, 200);
            if (config !== undefined && JSON.stringify(config) !== JSON.stringify(plugin.config_schema)) fields.config_schema = config;
          }
          if (changed.length > 0 || Object.keys(fields).length > 0 || recompiled) {
            await updatePlugin(db, plugin.id, fields);
            if (fields.config_schema !== undefined) await sealStoredSecrets(db, services.secrets, services.log, { pluginId: plugin.id });
            await logActivity(db, {
              organizationId: org.id,
              userId: principal.userId,
              scope: 'Plugin',
              itemId: plugin.id,
              activity: 'source_updated',
              name: fields.name ?? plugin.name,
              extra: { files: changed },
            });
          }
          return { teams: await teamsUsing(db, plugin.id), hashes: [plugin.source_hash, compiled?.hash].filter((h): h is string => !!h) };
        });
        // The code first: a worker that sees the configs' new records finds the code they name.
        await services.pluginSourcesKv.sync(hashes);
        await services.pluginConfigsKv.sync(teams);
        return { status: 200 };
      },
    }),
  ];

  if (kind === 'transformation') return routes;

  routes.push(
    defineRoute({
      method: 'DELETE',
      path: `${base}:id/`,
      scope: 'plugin:write',
      operationId: op('destroy'),
      summary:
        "Uninstall a plugin: it and every config of it are deleted (a global plugin must be made local first; one that other organizations' projects configured while it was global is refused until they remove their configs)",
      tag,
      params: pluginPath,
      response: { status: 204, description: 'Deleted' },
      errors: [400, 403],
      async handler({ principal, params, services }) {
        const teams = await inTransaction(services.pool, async (db) => {
          const { org } = await pluginOrganization(db, principal, params.organization_id, 'write');
          const plugin = await ownPlugin(db, org, kind, params.id, 'forbidden');
          if (plugin.is_global) throw apiError('validation_error', 'This plugin is marked as global! Make it local before uninstallation');
          // As for deleting the organization: other organizations' configs would go with it.
          const elsewhere = await configsInOtherOrganizations(db, plugin.id, org.id);
          if (elsewhere > 0) {
            throw apiError(
              'validation_error',
              `${elsewhere} plugin config(s) in other organizations' projects use this plugin; they must be removed there first.`,
            );
          }
          const teams = await teamsUsing(db, plugin.id);
          await deletePlugin(db, plugin.id);
          await logActivity(db, { organizationId: org.id, userId: principal.userId, scope: 'Plugin', itemId: plugin.id, activity: 'uninstalled', name: plugin.name });
          return teams;
        });
        await services.pluginConfigsKv.sync(teams);
        return { status: 204 };
      },
    }),

    defineRoute({
      method: 'GET',
      path: `${base}:id/check_for_updates/`,
      scope: 'plugin:read',
      operationId: op('check_for_updates'),
      summary: 'Record an update check (latest_tag becomes the installed tag: Spate does not reach plugin repositories). Empty body.',
      tag,
      params: pluginPath,
      response: emptyOk,
      errors: [403],
      async handler({ principal, params, services }) {
        const { org, level } = await pluginOrganization(services.pool, principal, params.organization_id, 'read');
        const plugin = await ownPlugin(services.pool, org, kind, params.id, 'not_found');
        if (level < PLUGINS_ACCESS.install) throw apiError('permission_denied', 'Plugin installation is not available for the current organization!');
        // Not an update of the plugin itself: updated_at (and the workers' KV records) stay.
        await services.pool.query('update plugins set latest_tag = tag, latest_tag_checked_at = clock_timestamp() where id = $1', [plugin.id]);
        return { status: 200 };
      },
    }),

    defineRoute({
      method: 'GET',
      path: `${base}:id/source/`,
      scope: 'plugin:read',
      operationId: op('source'),
      summary: "A plugin's source files: answers 200 with an empty body, as the interface says",
      tag,
      params: pluginPath,
      response: emptyOk,
      errors: [403],
      async handler({ principal, params, services }) {
        const { org, level } = await pluginOrganization(services.pool, principal, params.organization_id, 'read');
        await ownPlugin(services.pool, org, kind, params.id, 'not_found');
        if (level < PLUGINS_ACCESS.install) throw apiError('permission_denied', 'Plugin source editing is not available for the current organization!');
        return { status: 200 };
      },
    }),

    defineRoute({
      method: 'POST',
      path: `${base}:id/upgrade/`,
      scope: 'plugin:write',
      operationId: op('upgrade'),
      summary: 'Upgrade a plugin: the body fields (typically a new tag) are applied and latest_tag follows the tag. Empty body.',
      tag,
      params: pluginPath,
      requestBody: pluginUpdate,
      response: emptyOk,
      errors: [403],
      async handler({ principal, params, body, services }) {
        await applyUpdate(services, principal, params, collection, body, 'upgraded');
        return { status: 200 };
      },
    }),
  );

  for (const action of ['activity', 'exports_unsubscribe_configs', 'repository', 'unused'] as const) {
    routes.push(
      defineRoute({
        method: 'GET',
        path: `${base}${action}/`,
        scope: 'plugin:read',
        operationId: op(action),
        summary: `${action}: answers 200 with an empty body, as the interface says${action === 'activity' ? ' (changes are recorded in the activity log)' : ''}`,
        tag,
        params: organizationChildPath,
        response: emptyOk,
        errors: [403],
        async handler({ principal, params, services }) {
          await pluginOrganization(services.pool, principal, params.organization_id, 'read');
          return { status: 200 };
        },
      }),
    );
  }
  return routes;
}

export const pluginRoutes: Route[] = PLUGIN_COLLECTIONS.flatMap(collectionRoutes);
