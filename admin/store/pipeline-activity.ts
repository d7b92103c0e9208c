// What the delivery side did lately, as the admin server stored it from the pipeline streams
// (batch export runs from BATCH_EXPORT_RUNS, plugin logs from PLUGIN_LOGS): counts for anyone,
// and the runs and errors themselves for a key that may see their projects.
import type { Queryable } from '../db/pool.js';
import type { Principal } from '../http/route.js';

export interface ActivityCounts {
  /** Runs of live batch exports updated in the last 24 hours, by status. */
  exportRunsByStatus: Record<string, number>;
  /** Plugin log entries of type ERROR in the last hour. */
  pluginErrorsLastHour: number;
}

export async function activityCounts(db: Queryable): Promise<ActivityCounts> {
  const [runs, errors] = await Promise.all([
    db.query<{ status: string; n: number }>(
      `select r.status, count(*)::int as n from batch_export_runs r
       join batch_exports e on e.id = r.batch_export_id and not e.deleted
       where r.last_updated_at > now() - interval '24 hours'
       group by r.status`,
    ),
    db.query<{ n: number }>(`select count(*)::int as n from plugin_log_entries where type = 'ERROR' and timestamp > now() - interval '1 hour'`),
  ]);
  return {
    exportRunsByStatus: Object.fromEntries(runs.rows.map((r) => [r.status, r.n])),
    pluginErrorsLastHour: errors.rows[0]?.n ?? 0,
  };
}

export interface RecentExportRun {
  id: string;
  batch_export_id: string;
  batch_export_name: string;
  destination_type: string;
  team_id: number;
  status: string;
  records_completed: number | null;
  latest_error: string | null;
  data_interval_start: Date | null;
  data_interval_end: Date;
  last_updated_at: Date;
}

export interface RecentPluginError {
  id: string;
  team_id: number;
  plugin_id: number;
  plugin_name: string | null;
  plugin_config_id: number;
  timestamp: Date;
  source: string;
  message: string;
}

// The projects the key may see, as /api/projects/:id/ decides (store/projects.ts).
const VISIBLE = `join projects p on p.id = $TEAM
  join organization_memberships m on m.organization_id = p.organization_id and m.user_id = $1
  where ($2::uuid[] is null or p.organization_id = any($2::uuid[]))`;

export async function recentExportRuns(db: Queryable, principal: Principal, limit: number): Promise<RecentExportRun[]> {
  const { rows } = await db.query<RecentExportRun>(
    `select r.id, r.batch_export_id, e.name as batch_export_name, e.destination_type, e.team_id, r.status,
            r.records_completed, r.latest_error, r.data_interval_start, r.data_interval_end, r.last_updated_at
     from batch_export_runs r
     join batch_exports e on e.id = r.batch_export_id and not e.deleted
     ${VISIBLE.replace('$TEAM', 'e.team_id')}
     order by r.last_updated_at desc, r.id desc
     limit $3`,
    [principal.userId, principal.scopedOrganizations, limit],
  );
  return rows;
}

export async function recentPluginErrors(db: Queryable, principal: Principal, limit: number): Promise<RecentPluginError[]> {
  const { rows } = await db.query<RecentPluginError>(
    `select l.id, l.team_id, l.plugin_id, pl.name as plugin_name, l.plugin_config_id, l.timestamp, l.source, l.message
     from plugin_log_entries l
     left join plugins pl on pl.id = l.plugin_id
     ${VISIBLE.replace('$TEAM', 'l.team_id')}
     and l.type = 'ERROR'
     order by l.timestamp desc, l.id desc
     limit $3`,
    [principal.userId, principal.scopedOrganizations, limit],
  );
  return rows;
}
