// /api/organizations/:organization_id/batch_exports/: scheduled exports of a project's events
// or persons to S3, PostgreSQL, HTTP or nowhere (NoOp). Every change reaches the
// spate-batch-exports KV bucket before the answer; backfills go to the export runner on
// BATCH_EXPORT_BACKFILLS through the outbox.
import { z } from 'zod';
import { INTERVAL_SECONDS, pipelineSubject, type BatchExportBackfillRequest } from '../../lib/index.js';
import { checkDestinationConfig, checkDestinationRules, deepMerge, type DestinationType } from '../batch-export-destinations.js';
import { sealDestinationConfig } from '../secrets-at-rest.js';
import { inTransaction, pgErrorCode, PG_FOREIGN_KEY_VIOLATION, type Queryable } from '../db/pool.js';
import { apiError, notFound } from '../errors.js';
import { paginate, pageOf } from '../http/pagination.js';
import { defineRoute, type Principal } from '../http/route.js';
import { parseIsoTime } from '../iso-time.js';
import {
  batchExportBackfill,
  batchExportCreate,
  batchExportSchema,
  batchExportUpdate,
  paginatedBatchExports,
} from '../pipeline-schemas.js';
import { organizationChildPath, organizationItemPath } from '../schemas.js';
import type { Services } from '../services.js';
import { changesBetween, logActivity } from '../store/activity.js';
import {
  backfillRunCount,
  batchExportJson,
  createBackfill,
  createBatchExport,
  deleteBatchExport,
  findBatchExport,
  latestRuns,
  listBatchExports,
  setBatchExportPaused,
  updateBatchExport,
  type BatchExportFields,
  type BatchExportRow,
} from '../store/batch-exports.js';
import type { OrganizationAccess } from '../store/organizations.js';
import { organizationOr404 } from './common.js';

const tag = 'batch exports';
const base = '/api/organizations/:organization_id/batch_exports/';

async function exportOr404(db: Queryable, principal: Principal, params: { organization_id: string; id: string }, lock = false) {
  const org = await organizationOr404(db, principal, params.organization_id);
  const row = await findBatchExport(db, org.id, params.id, lock);
  if (!row) throw notFound();
  return { org, row };
}

async function answer(services: Services, row: BatchExportRow) {
  return batchExportJson(row, (await latestRuns(services.pool, [row.id])).get(row.id) ?? []);
}

function checkWindow(start: Date | null | undefined, end: Date | null | undefined): void {
  if (start && end && start.getTime() >= end.getTime()) throw apiError('validation_error', "'start_at' must be before 'end_at'.", 'start_at');
}

async function projectOfOrganization(db: Queryable, org: OrganizationAccess, teamId: number | undefined): Promise<number> {
  const { rows } = await db.query<{ id: number }>(
    `select id from projects where organization_id = $1 and ($2::bigint is null or id = $2) order by id limit 1`,
    [org.id, teamId ?? null],
  );
  if (!rows[0]) {
    throw teamId === undefined
      ? apiError('validation_error', 'The organization has no project to export.', 'team_id')
      : apiError('validation_error', 'Project does not exist on this organization.', 'team_id');
  }
  return rows[0].id;
}

const BATCH_EXPORT_FIELDS = ['name', 'model', 'destination', 'interval', 'paused', 'last_paused_at', 'start_at', 'end_at', 'hogql_query'];

/** What activity records compare: the export as the API shows it (no secrets). */
const activityView = (row: BatchExportRow): Record<string, unknown> => batchExportJson(row, []);

// --- backfill input: worded as PostHog words it ---------------------------------------------------

function backfillDate(value: unknown, field: 'start_at' | 'end_at'): Date {
  const parsed = typeof value === 'string' ? parseIsoTime(value) : undefined;
  if (!parsed) {
    const shown = typeof value === 'string' ? value : JSON.stringify(value);
    throw apiError('validation_error', `Input ${shown} is not a valid ISO formatted datetime.`, field);
  }
  if (!parsed.zoned) throw apiError('validation_error', `Input ${value as string} is naive.`, field);
  return parsed.date;
}

/** Python's isoformat() of a UTC time, as PostHog's message shows it. */
function pythonIso(d: Date): string {
  const base = d.toISOString().slice(0, 19);
  const ms = d.getUTCMilliseconds();
  return `${base}${ms === 0 ? '' : `.${String(ms).padStart(3, '0')}000`}+00:00`;
}

export const batchExportRoutes = [
  defineRoute({
    method: 'GET',
    path: base,
    scope: 'batch_export:read',
    operationId: 'batch_exports_list',
    summary: "List the organization's batch exports, newest first (deleted ones are gone)",
    tag,
    params: organizationChildPath,
    paginated: true,
    response: { status: 200, description: 'A page of batch exports', schema: paginatedBatchExports },
    async handler({ principal, params, query, url, services }) {
      const org = await organizationOr404(services.pool, principal, params.organization_id);
      const page = pageOf(query);
      const { count, rows } = await listBatchExports(services.pool, org.id, page);
      const runs = await latestRuns(services.pool, rows.map((r) => r.id));
      return { status: 200, body: paginate(url, page, count, rows.map((r) => batchExportJson(r, runs.get(r.id) ?? []))) };
    },
  }),

  defineRoute({
    method: 'POST',
    path: base,
    scope: 'batch_export:write',
    operationId: 'batch_exports_create',
    summary: "Create a batch export of one of the organization's projects (team_id; default its first project)",
    tag,
    params: organizationChildPath,
    requestBody: batchExportCreate,
    response: { status: 201, description: 'The new batch export', schema: batchExportSchema },
    async handler({ principal, params, body, services }) {
      const org = await organizationOr404(services.pool, principal, params.organization_id);
      const input = body(batchExportCreate);
      const type = input.destination.type;
      const config = checkDestinationConfig(type, input.destination.config, false);
      const model = input.model ?? 'events';
      checkDestinationRules(type, config, model);
      checkWindow(input.start_at, input.end_at);
      let row: BatchExportRow;
      try {
        row = await inTransaction(services.pool, async (db) => {
          const teamId = await projectOfOrganization(db, org, input.team_id);
          const created = await createBatchExport(db, teamId, principal.userId, {
            name: input.name,
            model,
            destination_type: type,
            destination_config: sealDestinationConfig(type, config, teamId, services.secrets),
            interval: input.interval,
            paused: input.paused,
            last_paused_at: input.last_paused_at ?? (input.paused ? new Date() : undefined),
            start_at: input.start_at,
            end_at: input.end_at,
            hogql_query: input.hogql_query,
          });
          await logActivity(db, { organizationId: org.id, teamId, userId: principal.userId, scope: 'BatchExport', itemId: created.id, activity: 'created', name: created.name });
          return created;
        });
      } catch (err) {
        // The project was deleted meanwhile.
        if (pgErrorCode(err) === PG_FOREIGN_KEY_VIOLATION) throw apiError('validation_error', 'Project does not exist on this organization.', 'team_id');
        throw err;
      }
      await services.batchExportsKv.sync([row.id]);
      return { status: 201, body: batchExportJson(row, []) };
    },
  }),

  defineRoute({
    method: 'GET',
    path: `${base}:id/`,
    scope: 'batch_export:read',
    operationId: 'batch_exports_retrieve',
    summary: 'Retrieve a batch export with its ten newest runs',
    tag,
    params: organizationItemPath,
    response: { status: 200, description: 'The batch export', schema: batchExportSchema },
    async handler({ principal, params, services }) {
      const { row } = await exportOr404(services.pool, principal, params);
      return { status: 200, body: await answer(services, row) };
    },
  }),

  defineRoute({
    method: 'PATCH',
    path: `${base}:id/`,
    scope: 'batch_export:write',
    operationId: 'batch_exports_partial_update',
    summary: 'Update a batch export; destination.config is merged into the stored one (secrets kept unless given)',
    tag,
    params: organizationItemPath,
    requestBody: batchExportUpdate,
    response: { status: 200, description: 'The updated batch export', schema: batchExportSchema },
    async handler({ principal, params, body, services }) {
      const row = await inTransaction(services.pool, async (db) => {
        const { org, row: current } = await exportOr404(db, principal, params, true);
        const input = body(batchExportUpdate);
        const fields: BatchExportFields = {
          name: input.name,
          model: input.model,
          interval: input.interval,
          paused: input.paused,
          last_paused_at: input.last_paused_at,
          start_at: input.start_at,
          end_at: input.end_at,
          hogql_query: input.hogql_query,
        };
        const currentType = current.destination_type as DestinationType;
        let type = currentType;
        let config = current.destination_config;
        if (input.destination) {
          type = input.destination.type ?? currentType;
          if (type !== currentType) {
            // Another destination: its configuration starts afresh, complete.
            config = checkDestinationConfig(type, input.destination.config ?? {}, false);
          } else if (input.destination.config) {
            config = deepMerge(current.destination_config, checkDestinationConfig(type, input.destination.config, true));
          }
          fields.destination_type = type;
          fields.destination_config = sealDestinationConfig(type, config, current.team_id, services.secrets);
        }
        checkDestinationRules(type, config, fields.model ?? current.model);
        checkWindow(fields.start_at === undefined ? current.start_at : fields.start_at, fields.end_at === undefined ? current.end_at : fields.end_at);
        if (fields.paused === true && !current.paused && fields.last_paused_at === undefined) fields.last_paused_at = new Date();
        const updated = await updateBatchExport(db, current.id, fields);
        const changes = changesBetween(activityView(current), activityView(updated), BATCH_EXPORT_FIELDS);
        if (JSON.stringify(current.destination_config) !== JSON.stringify(updated.destination_config) && !changes.some((c) => c.field === 'destination')) {
          // Only a secret changed: record that the destination changed, without its values.
          changes.push({ field: 'destination', before: '(secret)', after: '(secret)' });
        }
        if (changes.length > 0) {
          await logActivity(db, { organizationId: org.id, teamId: current.team_id, userId: principal.userId, scope: 'BatchExport', itemId: current.id, activity: 'updated', name: updated.name, changes });
        }
        return updated;
      });
      await services.batchExportsKv.sync([row.id]);
      return { status: 200, body: await answer(services, row) };
    },
  }),

  defineRoute({
    method: 'DELETE',
    path: `${base}:id/`,
    scope: 'batch_export:write',
    operationId: 'batch_exports_destroy',
    summary: 'Delete a batch export (its unfinished runs are cancelled; it leaves the runner’s KV bucket)',
    tag,
    params: organizationItemPath,
    response: { status: 204, description: 'Deleted' },
    async handler({ principal, params, services }) {
      const id = await inTransaction(services.pool, async (db) => {
        const { org, row } = await exportOr404(db, principal, params, true);
        await deleteBatchExport(db, row.id);
        await logActivity(db, { organizationId: org.id, teamId: row.team_id, userId: principal.userId, scope: 'BatchExport', itemId: row.id, activity: 'deleted', name: row.name });
        return row.id;
      });
      await services.batchExportsKv.sync([id]);
      return { status: 204 };
    },
  }),

  defineRoute({
    method: 'POST',
    path: `${base}:id/backfill/`,
    scope: 'batch_export:write',
    operationId: 'batch_exports_backfill',
    summary:
      'Backfill start_at..end_at (ISO 8601 with an offset, end not in the future): records one run per interval (status Starting) and ' +
      'asks the export runner to export them (stream BATCH_EXPORT_BACKFILLS). Empty body on success.',
    tag,
    params: organizationItemPath,
    requestBody: batchExportBackfill,
    response: { status: 200, description: 'Backfill recorded (empty body)' },
    async handler({ principal, params, body, services }) {
      await inTransaction(services.pool, async (db) => {
        const { org, row } = await exportOr404(db, principal, params, true);
        const input = body(z.looseObject({ start_at: z.unknown().optional(), end_at: z.unknown().optional() }));
        if (input.start_at === undefined || input.start_at === null || input.end_at === undefined || input.end_at === null) {
          throw apiError('validation_error', "Both 'start_at' and 'end_at' must be specified");
        }
        const start = backfillDate(input.start_at, 'start_at');
        const end = backfillDate(input.end_at, 'end_at');
        if (start.getTime() >= end.getTime()) throw apiError('validation_error', "The initial backfill datetime 'start_at' happens after 'end_at'");
        if (end.getTime() > Date.now()) throw apiError('validation_error', `The provided 'end_at' (${pythonIso(end)}) is in the future`, 'end_at');
        const step = INTERVAL_SECONDS[row.interval];
        const runs = backfillRunCount(start, end, step);
        const max = services.config.backfillMaxRuns;
        if (runs > max) {
          throw apiError('validation_error', `A backfill may cover at most ${max} intervals of '${row.interval}'; this one covers ${runs}. Split it into smaller ranges.`);
        }
        const backfill = await createBackfill(db, row.id, start, end, step, principal.userId);
        const request: BatchExportBackfillRequest = {
          id: backfill.id,
          batch_export_id: row.id,
          team_id: row.team_id,
          start_at: start.toISOString(),
          end_at: end.toISOString(),
          interval: row.interval,
          interval_seconds: step,
          total_runs: backfill.total_runs,
          created_at: backfill.created_at.toISOString(),
        };
        await services.outbox.enqueue(db, pipelineSubject('batchExportBackfills', row.team_id, row.id), `backfill:${backfill.id}`, request);
        await logActivity(db, {
          organizationId: org.id,
          teamId: row.team_id,
          userId: principal.userId,
          scope: 'BatchExport',
          itemId: row.id,
          activity: 'backfill_created',
          name: row.name,
          extra: { backfill_id: backfill.id, start_at: request.start_at, end_at: request.end_at, total_runs: backfill.total_runs },
        });
      });
      await services.outbox.flush();
      return { status: 200 };
    },
  }),

  defineRoute({
    method: 'GET',
    path: `${base}:id/logs/`,
    scope: 'batch_export:read',
    operationId: 'batch_exports_logs',
    summary: 'Logs of a batch export: answers 200 with an empty body, as the interface says (the runner’s entries are stored)',
    tag,
    params: organizationItemPath,
    response: { status: 200, description: 'Empty body' },
    async handler({ principal, params, services }) {
      await exportOr404(services.pool, principal, params);
      return { status: 200 };
    },
  }),

  ...(['pause', 'unpause'] as const).map((action) =>
    defineRoute({
      method: 'POST',
      path: `${base}:id/${action}/`,
      scope: 'batch_export:write',
      operationId: `batch_exports_${action}`,
      summary:
        action === 'pause'
          ? 'Pause a batch export (sets last_paused_at); pausing a paused export changes nothing. Empty body.'
          : 'Unpause a batch export; unpausing a running export changes nothing. Empty body.',
      tag,
      params: organizationItemPath,
      response: { status: 200, description: `${action === 'pause' ? 'Paused' : 'Unpaused'} (empty body)` },
      async handler({ principal, params, services }) {
        const id = await inTransaction(services.pool, async (db) => {
          const { org, row } = await exportOr404(db, principal, params, true);
          const { changed } = await setBatchExportPaused(db, row.id, action === 'pause');
          if (changed) {
            await logActivity(db, { organizationId: org.id, teamId: row.team_id, userId: principal.userId, scope: 'BatchExport', itemId: row.id, activity: `${action}d`, name: row.name });
          }
          return row.id;
        });
        await services.batchExportsKv.sync([id]);
        return { status: 200 };
      },
    }),
  ),
];
