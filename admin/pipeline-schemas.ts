// Request and response shapes of the batch export, pipeline plugin and plugin config routes, in
// the same registry as schemas.ts (so they are components of the OpenAPI document).
import { z } from 'zod';
import { BATCH_EXPORT_INTERVALS, PLUGIN_LOG_SOURCES, PLUGIN_LOG_TYPES } from '../lib/index.js';
import { DESTINATION_TYPES } from './batch-export-destinations.js';
import { parseTimestamp } from './consumers/lines.js';
import { storable, text } from './http/validation.js';
import { apiSchemas, integerId, organizationChildPath, paginated } from './schemas.js';

const datetime = () => z.string().meta({ format: 'date-time' });
const uuid = () => z.guid();
/** A free-form JSON object (stored as jsonb, so no NUL or lone surrogate anywhere inside). */
const jsonObject = () => storable(z.record(z.string(), z.unknown()));

export const DATETIME_FORMAT_MESSAGE = 'Datetime has wrong format. Use one of these formats instead: YYYY-MM-DDThh:mm[:ss[.uuuuuu]][+HH:MM|-HH:MM|Z].';

/** An ISO 8601 date and time in a body (no offset means UTC), as a Date. */
export const datetimeInput = () =>
  z
    .string()
    .transform((value, ctx) => {
      const parsed = parseTimestamp(value);
      if (!parsed) {
        ctx.addIssue({ code: 'custom', message: DATETIME_FORMAT_MESSAGE, input: value });
        return z.NEVER;
      }
      return parsed;
    })
    .meta({ format: 'date-time' });

const int32 = () => z.int().min(-2_147_483_648).max(2_147_483_647);

// --- paths ---------------------------------------------------------------------------------------

export const pluginPath = organizationChildPath.extend({ id: integerId() });
export const projectChildPath = z.object({ project_id: integerId() });
export const pluginConfigPath = z.object({ project_id: integerId(), id: integerId() });
export const pluginConfigLogsPath = z.object({ project_id: integerId(), plugin_config_id: integerId() });

// --- batch exports -------------------------------------------------------------------------------

export const batchExportRunSchema = z
  .object({
    id: uuid(),
    status: z.enum(['Starting', 'Running', 'Completed', 'Failed', 'FailedRetryable', 'Cancelled', 'TimedOut', 'Terminated']),
    records_completed: z.int().nullable(),
    latest_error: z.string().nullable(),
    data_interval_start: datetime().nullable(),
    data_interval_end: datetime(),
    cursor: z.string().nullable(),
    created_at: datetime(),
    finished_at: datetime().nullable(),
    last_updated_at: datetime(),
    records_total_count: z.int().nullable(),
    batch_export: uuid().meta({ description: 'The export this run belongs to' }),
  })
  .register(apiSchemas, { id: 'BatchExportRun' });

export const batchExportSchema = z
  .object({
    id: uuid(),
    team_id: z.int().meta({ description: 'The project whose events or persons are exported' }),
    name: z.string(),
    model: z.enum(['events', 'persons']),
    destination: z.object({
      type: z.enum(DESTINATION_TYPES),
      config: jsonObject().meta({ description: 'Destination settings; secret fields (keys, passwords, tokens) are never shown' }),
    }),
    interval: z.enum(BATCH_EXPORT_INTERVALS),
    paused: z.boolean(),
    created_at: datetime(),
    last_updated_at: datetime(),
    last_paused_at: datetime().nullable(),
    start_at: datetime().nullable(),
    end_at: datetime().nullable(),
    latest_runs: z.array(batchExportRunSchema).meta({ description: 'The ten newest runs' }),
    hogql_query: z.string().nullable(),
    schema: z.unknown().meta({ description: 'Always null: Spate stores hogql_query as given' }),
  })
  .register(apiSchemas, { id: 'BatchExport' });

export const paginatedBatchExports = paginated(batchExportSchema, 'PaginatedBatchExportList');

const batchExportFields = {
  name: text(1000).min(1),
  model: z.enum(['events', 'persons']),
  interval: z.enum(BATCH_EXPORT_INTERVALS),
  paused: z.boolean(),
  last_paused_at: datetimeInput().nullable(),
  start_at: datetimeInput().nullable().meta({ description: 'No run is triggered before this time' }),
  end_at: datetimeInput().nullable().meta({ description: 'No run is triggered after this time; must be after start_at' }),
  hogql_query: text(65_536).nullable(),
};

const destinationFields = {
  type: z.enum(DESTINATION_TYPES),
  config: jsonObject().meta({
    description:
      'S3: bucket_name, region, prefix (required), aws_access_key_id, aws_secret_access_key, compression, encryption, kms_key_id, endpoint_url, ' +
      'file_format, max_file_size_mb, use_virtual_style_addressing. Postgres: user, password, host, database (required), schema, table_name, ' +
      'port, has_self_signed_cert. HTTP: url, token (required). NoOp: arg. Every type: exclude_events, include_events.',
  }),
};

export const batchExportCreate = z
  .object({
    ...batchExportFields,
    model: batchExportFields.model.optional().meta({ description: 'Default events' }),
    destination: z.object(destinationFields),
    paused: batchExportFields.paused.optional(),
    last_paused_at: batchExportFields.last_paused_at.optional(),
    start_at: batchExportFields.start_at.optional(),
    end_at: batchExportFields.end_at.optional(),
    hogql_query: batchExportFields.hogql_query.optional(),
    team_id: z.int().optional().meta({ description: "The project to export (one of the organization's); default: its first project" }),
  })
  .register(apiSchemas, { id: 'BatchExportCreate' });

export const batchExportUpdate = z
  .object({
    ...batchExportFields,
    destination: z.object(destinationFields).partial().meta({
      description: 'config is merged into the stored one (nested objects too); a new type replaces the config',
    }),
  })
  .partial()
  .register(apiSchemas, { id: 'PatchedBatchExport' });

export const batchExportBackfill = z
  .object({
    start_at: z.string().meta({ format: 'date-time', description: 'ISO 8601 with a UTC offset' }),
    end_at: z.string().meta({ format: 'date-time', description: 'ISO 8601 with a UTC offset; not in the future' }),
  })
  .meta({ description: 'Records one run (status Starting) per interval from start_at to end_at and asks the runner to export them' })
  .register(apiSchemas, { id: 'BatchExportBackfill' });

// --- plugins -------------------------------------------------------------------------------------

export const PLUGIN_TYPES = ['local', 'custom', 'repository', 'source', 'inline'] as const;

const stringList = () => z.array(text(200));

export const pluginSchema = z
  .object({
    id: z.int(),
    plugin_type: z.enum(PLUGIN_TYPES),
    name: z.string(),
    description: z.string(),
    url: z.string().nullable(),
    icon: z.string().nullable(),
    config_schema: z.unknown(),
    tag: z.string().nullable(),
    latest_tag: z.string().nullable(),
    is_global: z.boolean(),
    organization_id: uuid(),
    organization_name: z.string(),
    capabilities: jsonObject(),
    metrics: z.unknown(),
    public_jobs: z.unknown(),
    hog_function_migration_available: z.boolean(),
  })
  .register(apiSchemas, { id: 'PipelinePlugin' });

export const paginatedPlugins = paginated(pluginSchema, 'PaginatedPipelinePluginList');

const capabilities = () =>
  z
    .looseObject({
      methods: stringList().optional(),
      jobs: stringList().optional(),
      scheduled_tasks: stringList().optional(),
    })
    .meta({ description: 'Must agree with the collection (e.g. methods containing processEvent for a transformation)' });

const pluginFields = {
  plugin_type: z.enum(PLUGIN_TYPES),
  name: text(200).min(1),
  description: text(10_000),
  icon: text(10_000).nullable(),
  config_schema: storable(z.union([z.array(z.unknown()), jsonObject()], { error: 'Expected a list of fields or a dictionary.' })).meta({ description: 'A list of fields ({key, name, type, required, secret, …})' }),
  tag: text(200).nullable(),
  is_global: z.boolean().meta({ description: 'Visible to every organization; needs plugins_access_level 9' }),
  capabilities: capabilities(),
  metrics: jsonObject(),
  public_jobs: jsonObject(),
};

export const pluginCreate = z
  .object(pluginFields)
  .partial()
  .meta({ description: 'plugin_type defaults to custom, name to "Untitled plugin", capabilities to what the collection implies' })
  .register(apiSchemas, { id: 'PipelinePluginCreate' });

export const pluginUpdate = z.object(pluginFields).partial().register(apiSchemas, { id: 'PatchedPipelinePlugin' });

export const pluginSourceUpdate = z
  .record(text(200).min(1), text().nullable())
  .meta({ description: 'File name → source (null deletes the file); plugin.json name and config are copied onto the plugin' })
  .register(apiSchemas, { id: 'PipelinePluginSource' });

// --- plugin configs ------------------------------------------------------------------------------

export const pluginConfigSchema = z
  .object({
    id: z.int(),
    plugin: z.int(),
    enabled: z.boolean(),
    order: z.int(),
    config: jsonObject().meta({ description: 'Configuration values; secret fields show a mask' }),
    error: z.null(),
    team_id: z.int(),
    plugin_info: pluginSchema.nullable().meta({ description: 'The plugin (single config answers; null in lists)' }),
    delivery_rate_24h: z.null(),
    created_at: datetime(),
    updated_at: datetime(),
    name: z.string(),
    description: z.string(),
    deleted: z.boolean(),
  })
  .register(apiSchemas, { id: 'PluginConfig' });

export const paginatedPluginConfigs = paginated(pluginConfigSchema, 'PaginatedPluginConfigList');
export const pluginConfigList = z.array(pluginConfigSchema).register(apiSchemas, { id: 'PluginConfigList' });

const pluginConfigFields = {
  enabled: z.boolean(),
  order: int32(),
  name: text(400).nullable(),
  description: text(10_000).nullable(),
  deleted: z.boolean().meta({ description: 'true also disables the config' }),
  config: jsonObject().meta({
    description: "Values for the plugin's config_schema; on update it replaces the stored config, except that a secret field sent as null (or left out) keeps its value",
  }),
};

export const pluginConfigCreate = z
  .object({ plugin: z.int().meta({ description: 'Plugin id' }), ...pluginConfigFields })
  .partial({ enabled: true, name: true, description: true, deleted: true, config: true })
  .register(apiSchemas, { id: 'PluginConfigCreate' });

export const pluginConfigUpdate = z.object(pluginConfigFields).partial().register(apiSchemas, { id: 'PatchedPluginConfig' });

export const pluginConfigRearrange = z
  .object({
    orders: z
      .record(z.string().regex(/^\d{1,10}$/), int32(), {
        error: (issue) => (issue.code === 'invalid_key' ? 'Not a valid plugin config id.' : undefined),
      })
      .optional(),
  })
  .meta({ description: '{"orders": {"<plugin config id>": <order>}}; configs that are not enabled configs of the project are ignored' })
  .register(apiSchemas, { id: 'PluginConfigRearrange' });

export const pluginConfigJob = z
  .object({
    ...pluginConfigFields,
    plugin: z.int().meta({ description: 'Accepted and ignored, like the other plugin config fields' }),
    job: z
      .object({
        type: text(200).min(1),
        payload: jsonObject().optional(),
        operation: z.enum(['start', 'stop']).optional(),
      })
      .meta({ description: 'The job to run; without it nothing is asked of the workers' }),
  })
  .partial()
  .meta({ description: 'The plugin config body fields (accepted, not applied) and the job to run' })
  .register(apiSchemas, { id: 'PluginConfigJob' });

export const pluginLogEntrySchema = z
  .object({
    id: uuid(),
    team_id: z.int(),
    plugin_id: z.int(),
    plugin_config_id: z.int(),
    timestamp: datetime(),
    source: z.enum(PLUGIN_LOG_SOURCES),
    type: z.enum(PLUGIN_LOG_TYPES),
    message: z.string(),
    instance_id: uuid().nullable(),
  })
  .register(apiSchemas, { id: 'PluginLogEntry' });

export const paginatedPluginLogs = paginated(pluginLogEntrySchema, 'PaginatedPluginLogEntryList');

export const pluginLogQuery = z.object({
  type_filter: z.enum(PLUGIN_LOG_TYPES).meta({ description: 'Only entries of this type (repeatable)' }),
  search: z.string().meta({ description: 'Only entries whose message contains this text (any case)' }),
  after: z.string().meta({ format: 'date-time', description: 'Only entries after this time' }),
  before: z.string().meta({ format: 'date-time', description: 'Only entries before this time' }),
});
