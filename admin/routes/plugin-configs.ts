// /api/projects/:project_id/plugin_configs/: plugins set up for a project, their order, their
// jobs and their logs. The project's enabled configs, in order, reach the spate-plugin-configs KV
// bucket before each answer; job requests go to PLUGIN_JOBS through the outbox. The
// organization's plugins_access_level must be at least 3 (below it the project has no configs).
import { z } from 'zod';
import { pipelineSubject, PLUGIN_LOG_TYPES, type PluginJobRequest } from '../../lib/index.js';
import { inTransaction, type Queryable } from '../db/pool.js';
import { apiError, notFound } from '../errors.js';
import { paginate, pageOf } from '../http/pagination.js';
import { defineRoute, type Principal, type Route } from '../http/route.js';
import { parseTimestamp } from '../iso-time.js';
import {
  DATETIME_FORMAT_MESSAGE,
  paginatedPluginConfigs,
  paginatedPluginLogs,
  pluginConfigCreate,
  pluginConfigJob,
  pluginConfigList,
  pluginConfigLogsPath,
  pluginConfigPath,
  pluginConfigRearrange,
  pluginConfigSchema,
  pluginConfigUpdate,
  pluginLogQuery,
  projectChildPath,
} from '../pipeline-schemas.js';
import { changesBetween, logActivity } from '../store/activity.js';
import {
  createPluginConfig,
  enabledPluginConfigs,
  findPluginConfig,
  listPluginConfigs,
  pluginConfigJson,
  rearrangePluginConfigs,
  secretFields,
  SECRET_FIELD_VALUE,
  updatePluginConfig,
  type PluginConfigRow,
} from '../store/plugin-configs.js';
import { listPluginLogs, pluginLogJson, type PluginLogFilters } from '../store/plugin-logs.js';
import { findConfigurablePlugin, getPlugin } from '../store/plugins.js';
import type { ProjectRow } from '../store/projects.js';
import { PLUGINS_ACCESS, pluginsAccessLevel, projectOr404 } from './common.js';
import { sealPluginConfig } from '../secrets-at-rest.js';

const tag = 'plugin configs';
const base = '/api/projects/:project_id/plugin_configs/';
const NOT_AVAILABLE = 'Plugin configuration is not available for the current organization!';
const CONFIG_FIELDS = ['enabled', 'order', 'name', 'description', 'deleted'];

/** The project, and whether its organization may configure plugins at all. */
async function projectAccess(db: Queryable, principal: Principal, projectId: number, lock = false): Promise<{ project: ProjectRow; canConfigure: boolean }> {
  const project = await projectOr404(db, principal, projectId, lock);
  return { project, canConfigure: (await pluginsAccessLevel(db, project.organization_id)) >= PLUGINS_ACCESS.config };
}

/** A config of the project; 404 also when the organization may not configure plugins. */
async function configOr404(db: Queryable, principal: Principal, params: { project_id: number; id: number }, lock = false) {
  const { project, canConfigure } = await projectAccess(db, principal, params.project_id);
  const config = canConfigure ? await findPluginConfig(db, project.id, params.id, lock) : undefined;
  if (!config) throw notFound();
  return { project, config };
}

async function detail(db: Queryable, config: PluginConfigRow) {
  return pluginConfigJson(config, await getPlugin(db, config.plugin_id));
}

/** The new config values; secret fields sent as null, as the mask, or left out keep their value. */
function configWithSecretsKept(next: Record<string, unknown>, previous: Record<string, unknown>, configSchema: unknown): Record<string, unknown> {
  const out = { ...next };
  for (const key of secretFields(configSchema)) {
    if ((out[key] === undefined || out[key] === null || out[key] === SECRET_FIELD_VALUE) && previous[key] !== undefined) out[key] = previous[key];
  }
  return out;
}

function configChanges(before: PluginConfigRow, after: PluginConfigRow) {
  const changes = changesBetween(before as unknown as Record<string, unknown>, after as unknown as Record<string, unknown>, CONFIG_FIELDS);
  const secrets = secretFields(after.plugin_config_schema);
  const keys = [...new Set([...Object.keys(before.config), ...Object.keys(after.config)])].sort();
  for (const change of changesBetween(before.config, after.config, keys, secrets)) changes.push({ ...change, field: `config.${change.field}` });
  return changes;
}

function logFilters(query: Record<string, unknown>): PluginLogFilters {
  const list = (v: unknown): unknown[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
  const last = (v: unknown): unknown => (Array.isArray(v) ? v.at(-1) : v);
  const types: string[] = [];
  for (const t of list(query.type_filter)) {
    if (typeof t !== 'string' || !(PLUGIN_LOG_TYPES as readonly string[]).includes(t)) {
      throw apiError('validation_error', `"${String(t)}" is not a valid choice.`, 'type_filter');
    }
    types.push(t);
  }
  const time = (name: 'after' | 'before'): Date | null => {
    const value = last(query[name]);
    if (value === undefined || value === '') return null;
    const parsed = parseTimestamp(value);
    if (!parsed) throw apiError('validation_error', DATETIME_FORMAT_MESSAGE, name);
    return parsed;
  };
  const search = last(query.search);
  return { types, search: typeof search === 'string' && search !== '' ? search : null, after: time('after'), before: time('before') };
}

const emptyOk = { status: 200 as const, description: 'Empty body' };

export const pluginConfigRoutes: Route[] = [
  defineRoute({
    method: 'GET',
    path: base,
    scope: 'plugin:read',
    operationId: 'plugin_configs_list',
    summary: "List a project's plugin configs in their order (deleted ones left out)",
    tag,
    params: projectChildPath,
    paginated: true,
    response: { status: 200, description: 'A page of plugin configs', schema: paginatedPluginConfigs },
    async handler({ principal, params, query, url, services }) {
      const { project, canConfigure } = await projectAccess(services.pool, principal, params.project_id);
      const page = pageOf(query);
      if (!canConfigure) return { status: 200, body: paginate(url, page, 0, []) };
      const { count, rows } = await listPluginConfigs(services.pool, project.id, page);
      return { status: 200, body: paginate(url, page, count, rows.map((r) => pluginConfigJson(r))) };
    },
  }),

  defineRoute({
    method: 'POST',
    path: base,
    scope: 'plugin:write',
    operationId: 'plugin_configs_create',
    summary: "Set up a plugin (the organization's own or a global one) for the project",
    tag,
    params: projectChildPath,
    requestBody: pluginConfigCreate,
    response: { status: 201, description: 'The new plugin config', schema: pluginConfigSchema },
    async handler({ principal, params, body, services }) {
      const { config, answer } = await inTransaction(services.pool, async (db) => {
        const { project, canConfigure } = await projectAccess(db, principal, params.project_id, true);
        if (!canConfigure) throw apiError('validation_error', NOT_AVAILABLE);
        const input = body(pluginConfigCreate);
        const plugin = input.plugin >= 1 && input.plugin <= 2_147_483_647 ? await findConfigurablePlugin(db, project.organization_id, input.plugin) : undefined;
        if (!plugin) throw apiError('validation_error', `Invalid pk "${input.plugin}" - object does not exist.`, 'plugin');
        const config = await createPluginConfig(db, project.id, plugin.id, {
          enabled: input.enabled,
          order: input.order,
          config: input.config && sealPluginConfig(input.config, plugin.config_schema, project.id, services.secrets),
          name: input.name,
          description: input.description,
          deleted: input.deleted,
        });
        await logActivity(db, {
          organizationId: project.organization_id,
          teamId: project.id,
          userId: principal.userId,
          scope: 'PluginConfig',
          itemId: config.id,
          activity: 'created',
          name: plugin.name,
        });
        return { config, answer: pluginConfigJson(config, plugin) };
      });
      await services.pluginConfigsKv.sync([String(config.team_id)]);
      return { status: 201, body: answer };
    },
  }),

  defineRoute({
    method: 'GET',
    path: `${base}:id/`,
    scope: 'plugin:read',
    operationId: 'plugin_configs_retrieve',
    summary: 'Retrieve a plugin config, with its plugin (plugin_info)',
    tag,
    params: pluginConfigPath,
    response: { status: 200, description: 'The plugin config', schema: pluginConfigSchema },
    async handler({ principal, params, services }) {
      const { config } = await configOr404(services.pool, principal, params);
      return { status: 200, body: await detail(services.pool, config) };
    },
  }),

  defineRoute({
    method: 'PATCH',
    path: `${base}:id/`,
    scope: 'plugin:write',
    operationId: 'plugin_configs_partial_update',
    summary: 'Update a plugin config (deleted: true also disables it; the plugin cannot change)',
    tag,
    params: pluginConfigPath,
    requestBody: pluginConfigUpdate,
    response: { status: 200, description: 'The updated plugin config', schema: pluginConfigSchema },
    async handler({ principal, params, body, services }) {
      const { updated, answer } = await inTransaction(services.pool, async (db) => {
        const { project, config } = await configOr404(db, principal, params, true);
        const input = body(pluginConfigUpdate);
        // A deleted config stays disabled until it is undeleted (the table enforces it too);
        // "deleted": true with "enabled": true deletes, as a delete always disables.
        if (input.enabled === true && input.deleted === undefined && config.deleted) {
          throw apiError('validation_error', 'A deleted plugin config cannot be enabled; send "deleted": false with it.', 'enabled');
        }
        const updated = await updatePluginConfig(db, project.id, config.id, {
          enabled: input.enabled,
          order: input.order,
          name: input.name,
          description: input.description,
          deleted: input.deleted,
          config:
            input.config && sealPluginConfig(configWithSecretsKept(input.config, config.config, config.plugin_config_schema), config.plugin_config_schema, project.id, services.secrets),
        });
        const changes = configChanges(config, updated);
        const base = { organizationId: project.organization_id, teamId: project.id, userId: principal.userId, scope: 'PluginConfig' as const, itemId: config.id, name: updated.plugin_name };
        const configOnly = changes.filter((c) => c.field !== 'enabled');
        if (configOnly.length > 0) await logActivity(db, { ...base, activity: 'config_updated', changes: configOnly });
        if (config.enabled !== updated.enabled) await logActivity(db, { ...base, activity: updated.enabled ? 'enabled' : 'disabled' });
        return { updated, answer: await detail(db, updated) };
      });
      await services.pluginConfigsKv.sync([String(updated.team_id)]);
      return { status: 200, body: answer };
    },
  }),

  defineRoute({
    method: 'DELETE',
    path: `${base}:id/`,
    scope: 'plugin:write',
    operationId: 'plugin_configs_destroy',
    summary: 'Delete a plugin config: it is disabled and left out of lists (its logs stay)',
    tag,
    params: pluginConfigPath,
    response: { status: 204, description: 'Deleted' },
    async handler({ principal, params, services }) {
      const teamId = await inTransaction(services.pool, async (db) => {
        const { project, config } = await configOr404(db, principal, params, true);
        await updatePluginConfig(db, project.id, config.id, { deleted: true });
        await logActivity(db, {
          organizationId: project.organization_id,
          teamId: project.id,
          userId: principal.userId,
          scope: 'PluginConfig',
          itemId: config.id,
          activity: 'deleted',
          name: config.plugin_name,
        });
        return project.id;
      });
      await services.pluginConfigsKv.sync([String(teamId)]);
      return { status: 204 };
    },
  }),

  ...(['activity', 'frontend'] as const).map((action) =>
    defineRoute({
      method: 'GET',
      path: `${base}:id/${action}/`,
      scope: 'plugin:read',
      operationId: `plugin_configs_${action}`,
      summary: `${action}: answers 200 with an empty body, as the interface says${action === 'activity' ? ' (changes are recorded in the activity log)' : ''}`,
      tag,
      params: pluginConfigPath,
      response: emptyOk,
      async handler({ principal, params, services }) {
        await configOr404(services.pool, principal, params);
        return { status: 200 };
      },
    }),
  ),

  defineRoute({
    method: 'POST',
    path: `${base}:id/job/`,
    scope: 'plugin:write',
    operationId: 'plugin_configs_job',
    summary:
      'Ask the plugin workers to run a job ({"job": {"type", "payload", "operation"}}) through stream PLUGIN_JOBS; the plugin config body fields are accepted (and not applied), and a body without "job" asks nothing. Empty body.',
    tag,
    params: pluginConfigPath,
    requestBody: pluginConfigJob,
    response: emptyOk,
    async handler({ principal, params, body, services }) {
      await inTransaction(services.pool, async (db) => {
        const { project, canConfigure } = await projectAccess(db, principal, params.project_id);
        if (!canConfigure) throw apiError('validation_error', NOT_AVAILABLE);
        const config = await findPluginConfig(db, project.id, params.id);
        if (!config) throw notFound();
        const sent = body(z.looseObject({ job: z.unknown().optional() }));
        const raw = sent.job;
        if ('job' in sent && (typeof raw !== 'object' || raw === null || Array.isArray(raw) || !('type' in raw))) {
          throw apiError('validation_error', 'The job type must be specified!');
        }
        const { job } = body(pluginConfigJob);
        if (!job) return;
        const { rows } = await db.query<{ id: string; created_at: Date }>(
          `insert into plugin_jobs (team_id, plugin_config_id, type, payload, operation, created_by_id)
           values ($1, $2, $3, $4, $5, $6) returning id, created_at`,
          [project.id, config.id, job.type, JSON.stringify(job.payload ?? {}), job.operation ?? 'start', principal.userId],
        );
        const request: PluginJobRequest = {
          id: rows[0]!.id,
          team_id: project.id,
          plugin_config_id: config.id,
          plugin_id: config.plugin_id,
          type: job.type,
          payload: job.payload ?? {},
          operation: job.operation ?? 'start',
          created_at: rows[0]!.created_at.toISOString(),
        };
        await services.outbox.enqueue(db, pipelineSubject('pluginJobs', project.id, config.id), `job:${request.id}`, request);
        await logActivity(db, {
          organizationId: project.organization_id,
          teamId: project.id,
          userId: principal.userId,
          scope: 'PluginConfig',
          itemId: config.id,
          activity: 'job_triggered',
          name: config.plugin_name,
          extra: { job_id: request.id, type: job.type, operation: request.operation },
        });
      });
      await services.outbox.flush();
      return { status: 200 };
    },
  }),

  defineRoute({
    method: 'POST',
    path: `${base}:id/migrate/`,
    scope: 'plugin:write',
    operationId: 'plugin_configs_migrate',
    summary: 'migrate: answers 200 with an empty body, as the interface says (Spate has no hog functions to migrate to; nothing changes)',
    tag,
    params: pluginConfigPath,
    response: emptyOk,
    async handler({ principal, params, services }) {
      await configOr404(services.pool, principal, params);
      return { status: 200 };
    },
  }),

  defineRoute({
    method: 'GET',
    path: `${base}:plugin_config_id/logs/`,
    scope: 'plugin:read',
    operationId: 'plugin_configs_logs_list',
    summary: "A plugin config's log entries, newest first; filters type_filter (repeatable), search, after, before",
    tag,
    params: pluginConfigLogsPath,
    paginated: true,
    query: pluginLogQuery,
    response: { status: 200, description: 'A page of log entries', schema: paginatedPluginLogs },
    errors: [400],
    async handler({ principal, params, query, url, services }) {
      const { config } = await configOr404(services.pool, principal, { project_id: params.project_id, id: params.plugin_config_id });
      const filters = logFilters(query);
      const page = pageOf(query);
      const { count, rows } = await listPluginLogs(services.pool, config.id, filters, page);
      return { status: 200, body: paginate(url, page, count, rows.map(pluginLogJson)) };
    },
  }),

  defineRoute({
    method: 'PATCH',
    path: `${base}rearrange/`,
    scope: 'plugin:write',
    operationId: 'plugin_configs_rearrange',
    summary: 'Set the order of enabled configs at once ({"orders": {"<config id>": <order>}}); answers with every enabled config in the new order',
    tag,
    params: projectChildPath,
    requestBody: pluginConfigRearrange,
    response: { status: 200, description: 'The enabled configs of the project, in order', schema: pluginConfigList },
    async handler({ principal, params, body, services }) {
      const { teamId, answer } = await inTransaction(services.pool, async (db) => {
        const { project, canConfigure } = await projectAccess(db, principal, params.project_id);
        if (!canConfigure) throw apiError('validation_error', NOT_AVAILABLE);
        const { orders = {} } = body(pluginConfigRearrange);
        const wanted = new Map(Object.entries(orders).map(([id, order]) => [Number(id), order]));
        const changes = await rearrangePluginConfigs(db, project.id, wanted);
        for (const change of changes) {
          await logActivity(db, {
            organizationId: project.organization_id,
            teamId: project.id,
            userId: principal.userId,
            scope: 'PluginConfig',
            itemId: change.id,
            activity: 'order_changed',
            name: change.pluginName,
            changes: [{ field: 'order', before: change.before, after: change.after }],
          });
        }
        return { teamId: project.id, answer: (await enabledPluginConfigs(db, project.id)).map((c) => pluginConfigJson(c)) };
      });
      await services.pluginConfigsKv.sync([String(teamId)]);
      return { status: 200, body: answer };
    },
  }),
];
