// Organizations and the caller's view of them (membership level, member count, projects).
import { isUuid } from '../../lib/index.js';
import type { Queryable } from '../db/pool.js';
import type { Principal } from '../http/route.js';
import { slugCandidate, slugify } from '../slug.js';
import { createProject, DEFAULT_PROJECT_NAME, type ProjectRow } from './projects.js';

export const LEVEL = { member: 1, admin: 8, owner: 15 } as const;
/** plugins_access_level: 0 none, 3 configure, 6 install, 9 root (global plugins). */
export const PLUGINS_ACCESS = { none: 0, config: 3, install: 6, root: 9 } as const;
export type PluginsAccessLevel = (typeof PLUGINS_ACCESS)[keyof typeof PLUGINS_ACCESS];
export type Level = 1 | 8 | 15;

export interface OrganizationJson {
  id: string;
  name: string;
  slug: string;
  logo_media_id: string | null;
  created_at: string;
  updated_at: string;
  membership_level: number | null;
  plugins_access_level: number;
  teams: Array<Record<string, unknown>>;
  available_product_features: unknown[];
  is_member_join_email_enabled: boolean;
  metadata: string | null;
  customer_id: string | null;
  enforce_2fa: boolean | null;
  member_count: string;
}

interface OrganizationRow {
  id: string;
  name: string;
  slug: string;
  logo_media_id: string | null;
  created_at: Date;
  updated_at: Date;
  membership_level: number;
  plugins_access_level: number;
  is_member_join_email_enabled: boolean;
  enforce_2fa: boolean | null;
  member_count: string;
  teams: Array<Record<string, unknown>>;
}

function organizationJson(o: OrganizationRow): OrganizationJson {
  return {
    id: o.id,
    name: o.name,
    slug: o.slug,
    logo_media_id: o.logo_media_id,
    created_at: o.created_at.toISOString(),
    updated_at: o.updated_at.toISOString(),
    membership_level: o.membership_level,
    plugins_access_level: o.plugins_access_level,
    teams: o.teams,
    // No billing or product features in Spate: nothing to list, no customer, no metadata.
    available_product_features: [],
    is_member_join_email_enabled: o.is_member_join_email_enabled,
    metadata: null,
    customer_id: null,
    enforce_2fa: o.enforce_2fa,
    // The spec types member_count as a string; count(*) arrives from pg as one.
    member_count: o.member_count,
  };
}

const SELECT = `
  select o.id, o.name, o.slug, o.logo_media_id, o.created_at, o.updated_at, m.level as membership_level,
    o.plugins_access_level, o.is_member_join_email_enabled, o.enforce_2fa,
    (select count(*) from organization_memberships c where c.organization_id = o.id) as member_count,
    coalesce((
      select json_agg(json_build_object('id', p.id, 'uuid', p.uuid, 'organization', p.organization_id,
        'project_id', p.id, 'name', p.name, 'api_token', p.api_token) order by p.id)
      from projects p where p.organization_id = o.id), '[]'::json) as teams
  from organizations o
  join organization_memberships m on m.organization_id = o.id and m.user_id = $1
  where ($2::uuid[] is null or o.id = any($2::uuid[]))`;

export interface OrganizationAccess {
  id: string;
  name: string;
  /** The caller's membership level. */
  level: Level;
}

/**
 * The organization if the key may see it (its user is a member and the key is not scoped to
 * other organizations); `@current` names the earliest one joined. undefined otherwise, so the
 * caller answers 404 exactly as for an organization that does not exist.
 */
export async function findOrganizationAccess(
  db: Queryable,
  principal: Principal,
  idOrCurrent: string,
  lock = false,
): Promise<OrganizationAccess | undefined> {
  if (idOrCurrent !== '@current' && !isUuid(idOrCurrent)) return undefined;
  const current = idOrCurrent === '@current';
  const read = async (id: string | null) => {
    const { rows } = await db.query<OrganizationAccess>(
      `select o.id, o.name, m.level from organizations o
       join organization_memberships m on m.organization_id = o.id and m.user_id = $1
       where ($2::uuid[] is null or o.id = any($2::uuid[])) and ($3::uuid is null or o.id = $3::uuid)
       order by m.joined_at, o.id limit 1`,
      [principal.userId, principal.scopedOrganizations, id],
    );
    return rows[0];
  };
  const found = await read(current ? null : idOrCurrent);
  if (!found || !lock) return found;
  // Lock first, then read again: in READ COMMITTED a statement that waited for the lock would
  // still see the caller's membership as it was before the wait (a concurrent demotion would be
  // missed); a new statement after the lock sees every change committed before it.
  const locked = await db.query('select 1 from organizations where id = $1 for no key update', [found.id]);
  if (locked.rowCount === 0) return undefined;
  return read(found.id);
}

export async function listOrganizations(
  db: Queryable,
  principal: Principal,
  page: { limit: number; offset: number },
): Promise<{ count: number; results: OrganizationJson[] }> {
  const values = [principal.userId, principal.scopedOrganizations];
  const count = await db.query<{ count: string }>(
    `select count(*) from organizations o
     join organization_memberships m on m.organization_id = o.id and m.user_id = $1
     where ($2::uuid[] is null or o.id = any($2::uuid[]))`,
    values,
  );
  const { rows } = await db.query<OrganizationRow>(`${SELECT} order by o.created_at, o.id limit $3 offset $4`, [
    ...values,
    page.limit,
    page.offset,
  ]);
  return { count: Number(count.rows[0]!.count), results: rows.map(organizationJson) };
}

/** The organization as the caller sees it (no scope filter: the caller checked access already). */
export async function getOrganizationJson(db: Queryable, userId: number, id: string): Promise<OrganizationJson> {
  const { rows } = await db.query<OrganizationRow>(`${SELECT} and o.id = $3`, [userId, null, id]);
  if (!rows[0]) throw new Error(`organization ${id} not found for user ${userId}`);
  return organizationJson(rows[0]);
}

export interface OrganizationFields {
  name?: string;
  logo_media_id?: string | null;
  is_member_join_email_enabled?: boolean;
  enforce_2fa?: boolean | null;
}

/**
 * Creates an organization with `userId` as its owner and a default project. The slug comes
 * from the name; a taken slug gets a random suffix (the unique index decides, so concurrent
 * creations with one name cannot collide).
 */
export async function createOrganization(
  db: Queryable,
  userId: number,
  fields: OrganizationFields & { name: string },
  options: { projectName?: string; pluginsAccessLevel?: PluginsAccessLevel } = {},
): Promise<{ id: string; project: ProjectRow }> {
  const base = slugify(fields.name);
  // Without a level, the column's default applies (3: configure plugins, install none).
  const level = options.pluginsAccessLevel === undefined ? { column: '', value: '' } : { column: ', plugins_access_level', value: ', $6' };
  let id: string | undefined;
  for (let attempt = 0; id === undefined; attempt++) {
    const { rows } = await db.query<{ id: string }>(
      `insert into organizations (name, slug, logo_media_id, is_member_join_email_enabled, enforce_2fa${level.column})
       values ($1, $2, $3, coalesce($4, true), $5${level.value})
       on conflict (slug) do nothing returning id`,
      [
        fields.name,
        slugCandidate(base, attempt),
        fields.logo_media_id ?? null,
        fields.is_member_join_email_enabled ?? null,
        fields.enforce_2fa ?? null,
        ...(options.pluginsAccessLevel === undefined ? [] : [options.pluginsAccessLevel]),
      ],
    );
    id = rows[0]?.id;
    if (attempt > 20 && id === undefined) throw new Error(`no free slug for ${base}`);
  }
  await db.query('insert into organization_memberships (organization_id, user_id, level) values ($1, $2, $3)', [id, userId, LEVEL.owner]);
  const project = await createProject(db, id, options.projectName ?? DEFAULT_PROJECT_NAME);
  return { id, project };
}

const UPDATABLE = ['name', 'logo_media_id', 'is_member_join_email_enabled', 'enforce_2fa'] as const;

export async function updateOrganization(db: Queryable, id: string, fields: OrganizationFields): Promise<void> {
  const sets: string[] = [];
  const values: unknown[] = [id];
  for (const column of UPDATABLE) {
    if (fields[column] === undefined) continue;
    values.push(fields[column]);
    sets.push(`${column} = $${values.length}`);
  }
  await db.query(`update organizations set ${[...sets, 'updated_at = clock_timestamp()'].join(', ')} where id = $1`, values);
}

/**
 * Configs in other organizations' projects of plugins this organization owns (a global plugin,
 * or one that was global). Deleting the organization would delete them with its plugins.
 */
export async function pluginConfigsElsewhere(db: Queryable, id: string): Promise<number> {
  // A config being created holds a key-share lock on its plugin (the foreign key): locking the
  // plugins first means every config is either counted here or waits for this transaction.
  await db.query('select 1 from plugins where organization_id = $1 for update', [id]);
  const { rows } = await db.query<{ n: number }>(
    `select count(*)::int as n from plugin_configs c
     join plugins p on p.id = c.plugin_id join projects t on t.id = c.team_id
     where p.organization_id = $1 and t.organization_id <> $1 and not c.deleted`,
    [id],
  );
  return rows[0]!.n;
}

/** Deletes the organization and everything in it; returns the API tokens of its projects. */
export async function deleteOrganization(db: Queryable, id: string): Promise<string[]> {
  const { rows } = await db.query<{ api_token: string }>('delete from projects where organization_id = $1 returning api_token', [id]);
  await db.query('delete from organizations where id = $1', [id]);
  return rows.map((r) => r.api_token);
}
