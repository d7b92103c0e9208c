// The NATS KV bucket `spate-projects` (project API key → { projectId, organizationId }), kept
// equal to the projects table by a KvMirror; ingest nodes watch it. The trigger
// notify_project_change announces changed tokens on channel `spate_projects`.
import { PROJECTS_BUCKET, type Logger, type NatsConnection, type ProjectRecord } from '../lib/index.js';
import type { Pool } from './db/pool.js';
import { KvMirror, type MirrorSpec } from './kv-mirror.js';

export const PROJECTS_CHANNEL = 'spate_projects';

export type ProjectsKv = KvMirror;
export type { ReconcileResult } from './kv-mirror.js';

function recordJson(record: ProjectRecord): string {
  return JSON.stringify({ projectId: record.projectId, organizationId: record.organizationId });
}

async function projectRecords(pool: Pool, tokens: readonly string[] | undefined): Promise<Map<string, string>> {
  const { rows } = await pool.query<{ api_token: string; id: number; organization_id: string }>(
    `select api_token, id, organization_id from projects ${tokens ? 'where api_token = any($1::text[])' : ''}`,
    tokens ? [tokens] : [],
  );
  return new Map(rows.map((r) => [r.api_token, recordJson({ projectId: r.id, organizationId: r.organization_id })]));
}

export const projectsMirror: MirrorSpec = {
  bucket: PROJECTS_BUCKET,
  channel: PROJECTS_CHANNEL,
  load: (pool, tokens) => projectRecords(pool, tokens),
  loadAll: (pool) => projectRecords(pool, undefined),
};

export function openProjectsKv(nc: NatsConnection, pool: Pool, log: Logger, replicas = 1): Promise<ProjectsKv> {
  return KvMirror.open(nc, projectsMirror, pool, log, replicas);
}
