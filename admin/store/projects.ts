// Projects (PostHog's "teams"): what events belong to, named by an integer id and reached by
// their project API key (`phc_…`), which the spate-projects KV bucket maps to the id.
import { generateProjectApiKey } from '../auth/keys.js';
import type { Queryable } from '../db/pool.js';
import type { Principal } from '../http/route.js';
import type { ProjectLimitColumns } from '../project-limits.js';

export interface ProjectRow extends ProjectLimitColumns {
  id: number;
  uuid: string;
  organization_id: string;
  name: string;
  api_token: string;
  created_at: Date;
  updated_at: Date;
}

export interface ProjectJson extends ProjectLimitColumns {
  id: number;
  uuid: string;
  organization: string;
  name: string;
  api_token: string;
  created_at: string;
  updated_at: string;
}

export function projectJson(p: ProjectRow): ProjectJson {
  return {
    id: p.id,
    uuid: p.uuid,
    organization: p.organization_id,
    name: p.name,
    api_token: p.api_token,
    created_at: p.created_at.toISOString(),
    updated_at: p.updated_at.toISOString(),
    capture_events_per_second: p.capture_events_per_second,
    capture_events_per_day: p.capture_events_per_day,
    historical_messages_per_second: p.historical_messages_per_second,
  };
}

const COLUMNS =
  'p.id, p.uuid, p.organization_id, p.name, p.api_token, p.created_at, p.updated_at, ' +
  'p.capture_events_per_second, p.capture_events_per_day, p.historical_messages_per_second';

/** Fields of a project that can be set (limits: null means the cluster default). */
export interface ProjectFields extends Partial<ProjectLimitColumns> {
  name?: string;
}

const SETTABLE = ['name', 'capture_events_per_second', 'capture_events_per_day', 'historical_messages_per_second'] as const;

export const DEFAULT_PROJECT_NAME = 'Default project';

export async function createProject(db: Queryable, organizationId: string, name: string, limits: Partial<ProjectLimitColumns> = {}): Promise<ProjectRow> {
  const { rows } = await db.query<ProjectRow>(
    `insert into projects as p (organization_id, name, api_token, capture_events_per_second, capture_events_per_day, historical_messages_per_second)
     values ($1, $2, $3, $4, $5, $6) returning ${COLUMNS}`,
    [
      organizationId,
      name,
      generateProjectApiKey(),
      limits.capture_events_per_second ?? null,
      limits.capture_events_per_day ?? null,
      limits.historical_messages_per_second ?? null,
    ],
  );
  return rows[0]!;
}

/** Projects of the organizations the key may see: one organization, or all of them. */
function visibleProjects(principal: Principal, organizationId: string | undefined): { where: string; values: unknown[] } {
  return {
    where: `p.organization_id in (
        select m.organization_id from organization_memberships m
        where m.user_id = $1 and ($2::uuid[] is null or m.organization_id = any($2::uuid[])))
      and ($3::uuid is null or p.organization_id = $3::uuid)`,
    values: [principal.userId, principal.scopedOrganizations, organizationId ?? null],
  };
}

export async function listProjects(
  db: Queryable,
  principal: Principal,
  organizationId: string | undefined,
  page: { limit: number; offset: number },
): Promise<{ count: number; rows: ProjectRow[] }> {
  const { where, values } = visibleProjects(principal, organizationId);
  const count = await db.query<{ count: string }>(`select count(*) from projects p where ${where}`, values);
  const { rows } = await db.query<ProjectRow>(
    `select ${COLUMNS} from projects p where ${where} order by p.id limit $4 offset $5`,
    [...values, page.limit, page.offset],
  );
  return { count: Number(count.rows[0]!.count), rows };
}

/** The project with the caller's membership level in its organization; undefined if not visible. */
export async function findVisibleProject(
  db: Queryable,
  principal: Principal,
  id: number,
  lock = false,
): Promise<(ProjectRow & { level: number }) | undefined> {
  const read = async () => {
    const { rows } = await db.query<ProjectRow & { level: number }>(
      `select ${COLUMNS}, m.level from projects p
       join organization_memberships m on m.organization_id = p.organization_id and m.user_id = $1
       where p.id = $3 and ($2::uuid[] is null or p.organization_id = any($2::uuid[]))`,
      [principal.userId, principal.scopedOrganizations, id],
    );
    return rows[0];
  };
  const found = await read();
  if (!found || !lock) return found;
  // Lock, then read again so the level is the one committed after any concurrent change.
  await db.query('select 1 from projects where id = $1 for no key update', [id]);
  return read();
}

/** Sets the given fields (undefined ones keep their value). */
export async function updateProject(db: Queryable, id: number, fields: ProjectFields): Promise<ProjectRow> {
  const sets: string[] = [];
  const values: unknown[] = [id];
  for (const column of SETTABLE) {
    if (fields[column] === undefined) continue;
    values.push(fields[column]);
    sets.push(`${column} = $${values.length}`);
  }
  const { rows } = await db.query<ProjectRow>(
    `update projects p set ${[...sets, 'updated_at = clock_timestamp()'].join(', ')} where p.id = $1 returning ${COLUMNS}`,
    values,
  );
  return rows[0]!;
}

export async function resetProjectToken(db: Queryable, id: number): Promise<ProjectRow> {
  const { rows } = await db.query<ProjectRow>(
    `update projects p set api_token = $2, updated_at = clock_timestamp() where p.id = $1 returning ${COLUMNS}`,
    [id, generateProjectApiKey()],
  );
  return rows[0]!;
}

export async function deleteProject(db: Queryable, id: number): Promise<string | undefined> {
  const { rows } = await db.query<{ api_token: string }>('delete from projects where id = $1 returning api_token', [id]);
  return rows[0]?.api_token;
}

export async function findProject(db: Queryable, id: number): Promise<ProjectRow | undefined> {
  const { rows } = await db.query<ProjectRow>(`select ${COLUMNS} from projects p where p.id = $1`, [id]);
  return rows[0];
}
