// Organization memberships: who belongs to an organization and at which level.
import type { Queryable } from '../db/pool.js';
import { prefixedUser, prefixedUserColumns, userJson, type UserJson, type UserRow } from './users.js';

export interface MemberRow {
  id: string;
  organization_id: string;
  user_id: number;
  level: number;
  joined_at: Date;
  updated_at: Date;
  user: UserRow;
}

export interface MemberJson {
  id: string;
  user: UserJson;
  level: number;
  joined_at: string;
  updated_at: string;
  is_2fa_enabled: boolean;
  has_social_auth: boolean;
}

export function memberJson(m: MemberRow): MemberJson {
  return {
    id: m.id,
    user: userJson(m.user),
    level: m.level,
    joined_at: m.joined_at.toISOString(),
    updated_at: m.updated_at.toISOString(),
    // Spate users sign in with API keys only: no second factor, no social login.
    is_2fa_enabled: false,
    has_social_auth: false,
  };
}

const SELECT = `select m.id, m.organization_id, m.user_id, m.level, m.joined_at, m.updated_at, ${prefixedUserColumns('u', 'user_')}
  from organization_memberships m join users u on u.id = m.user_id`;

function toRow(r: Record<string, unknown>): MemberRow {
  return {
    id: r.id as string,
    organization_id: r.organization_id as string,
    user_id: r.user_id as number,
    level: r.level as number,
    joined_at: r.joined_at as Date,
    updated_at: r.updated_at as Date,
    user: prefixedUser(r, 'user_')!,
  };
}

export async function listMembers(
  db: Queryable,
  organizationId: string,
  order: 'joined_at' | '-joined_at',
  page: { limit: number; offset: number },
): Promise<{ count: number; rows: MemberRow[] }> {
  const count = await db.query<{ count: string }>('select count(*) from organization_memberships where organization_id = $1', [organizationId]);
  const direction = order === 'joined_at' ? 'asc' : 'desc';
  const { rows } = await db.query<Record<string, unknown>>(
    `${SELECT} where m.organization_id = $1 order by m.joined_at ${direction}, m.id ${direction} limit $2 offset $3`,
    [organizationId, page.limit, page.offset],
  );
  return { count: Number(count.rows[0]!.count), rows: rows.map(toRow) };
}

export async function findMemberByUserUuid(db: Queryable, organizationId: string, userUuid: string): Promise<MemberRow | undefined> {
  const { rows } = await db.query<Record<string, unknown>>(`${SELECT} where m.organization_id = $1 and u.uuid = $2`, [
    organizationId,
    userUuid,
  ]);
  return rows[0] ? toRow(rows[0]) : undefined;
}

export async function findMemberByUserId(db: Queryable, organizationId: string, userId: number): Promise<MemberRow | undefined> {
  const { rows } = await db.query<Record<string, unknown>>(`${SELECT} where m.organization_id = $1 and m.user_id = $2`, [
    organizationId,
    userId,
  ]);
  return rows[0] ? toRow(rows[0]) : undefined;
}

export async function setMemberLevel(db: Queryable, membershipId: string, level: number): Promise<void> {
  await db.query('update organization_memberships set level = $2, updated_at = clock_timestamp() where id = $1', [membershipId, level]);
}

export async function deleteMember(db: Queryable, membershipId: string): Promise<void> {
  await db.query('delete from organization_memberships where id = $1', [membershipId]);
}

export async function countOwners(db: Queryable, organizationId: string): Promise<number> {
  const { rows } = await db.query<{ count: string }>(
    'select count(*) from organization_memberships where organization_id = $1 and level = 15',
    [organizationId],
  );
  return Number(rows[0]!.count);
}

/** Adds the user to the organization at `level`, or changes the level of an existing membership. */
export async function upsertMembership(db: Queryable, organizationId: string, userId: number, level: number): Promise<void> {
  await db.query(
    `insert into organization_memberships (organization_id, user_id, level) values ($1, $2, $3)
     on conflict (organization_id, user_id) do update set level = excluded.level, updated_at = clock_timestamp()
     where organization_memberships.level <> excluded.level`,
    [organizationId, userId, level],
  );
}

/** Locks the organization row: membership and invite changes of one organization run one at a time. */
export async function lockOrganization(db: Queryable, organizationId: string): Promise<boolean> {
  const { rowCount } = await db.query('select 1 from organizations where id = $1 for no key update', [organizationId]);
  return rowCount === 1;
}
