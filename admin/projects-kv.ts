// The NATS KV bucket `spate-projects` (project API key → { projectId, organizationId, limits? }),
// kept equal to the projects table by a KvMirror; ingest nodes watch it. The trigger
// notify_project_change announces changed tokens on channel `spate_projects`. `limits` are the
// ones that apply (the project's own or the cluster default of ProjectLimitSettings).
import { PROJECTS_BUCKET, type Logger, type NatsConnection, type ProjectRecord } from '../lib/index.js';
import type { Pool } from './db/pool.js';
import { KvMirror, type MirrorSpec } from './kv-mirror.js';
import { effectiveLimits, type ProjectLimitColumns, type ProjectLimitSettings } from './project-limits.js';

export const PROJECTS_CHANNEL = 'spate_projects';

export type ProjectsKv = KvMirror;
export type { ReconcileResult } from './kv-mirror.js';

/** The record's JSON, keys in a fixed order (the mirror compares values as strings). */
function recordJson(record: ProjectRecord): string {
  const { eventsPerSecond, eventsPerDay, historicalMessagesPerSecond } = record.limits ?? {};
  const limits = record.limits ? { limits: { eventsPerSecond, eventsPerDay, historicalMessagesPerSecond } } : {};
  return JSON.stringify({ projectId: record.projectId, organizationId: record.organizationId, ...limits });
}

async function projectRecords(pool: Pool, settings: ProjectLimitSettings, tokens: readonly string[] | undefined): Promise<Map<string, string>> {
  const { rows } = await pool.query<{ api_token: string; id: number; organization_id: string } & ProjectLimitColumns>(
    `select api_token, id, organization_id, capture_events_per_second, capture_events_per_day, historical_messages_per_second
     from projects ${tokens ? 'where api_token = any($1::text[])' : ''}`,
    tokens ? [tokens] : [],
  );
  return new Map(
    rows.map((r) => [r.api_token, recordJson({ projectId: r.id, organizationId: r.organization_id, limits: effectiveLimits(r, settings) })]),
  );
}

export function projectsMirror(settings: ProjectLimitSettings): MirrorSpec {
  return {
    bucket: PROJECTS_BUCKET,
    channel: PROJECTS_CHANNEL,
    load: (pool, tokens) => projectRecords(pool, settings, tokens),
    loadAll: (pool) => projectRecords(pool, settings, undefined),
  };
}

export function openProjectsKv(nc: NatsConnection, pool: Pool, log: Logger, settings: ProjectLimitSettings, replicas = 1): Promise<ProjectsKv> {
  return KvMirror.open(nc, projectsMirror(settings), pool, log, replicas);
}
