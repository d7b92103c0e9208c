// Organization invites. An invite expires `INVITE_VALIDITY` after it was made (computed, not stored).
import type { Queryable } from '../db/pool.js';
import { prefixedUser, prefixedUserColumns, userJson, type UserJson, type UserRow } from './users.js';

export interface ProjectAccess {
  id: number;
  level: 'none' | 'member' | 'admin';
}

export interface InviteRow {
  id: string;
  organization_id: string;
  target_email: string;
  first_name: string;
  level: number;
  message: string | null;
  private_project_access: ProjectAccess[];
  emailing_attempt_made: boolean;
  created_at: Date;
  updated_at: Date;
  created_by: UserRow | null;
}

export interface InviteJson {
  id: string;
  target_email: string;
  first_name: string;
  emailing_attempt_made: boolean;
  level: number;
  is_expired: boolean;
  created_by: UserJson | null;
  created_at: string;
  updated_at: string;
  message: string | null;
  private_project_access: ProjectAccess[];
}

export function inviteJson(i: InviteRow, validityMs: number, now = Date.now()): InviteJson {
  return {
    id: i.id,
    target_email: i.target_email,
    first_name: i.first_name,
    emailing_attempt_made: i.emailing_attempt_made,
    level: i.level,
    is_expired: i.created_at.getTime() < now - validityMs,
    created_by: i.created_by ? userJson(i.created_by) : null,
    created_at: i.created_at.toISOString(),
    updated_at: i.updated_at.toISOString(),
    message: i.message,
    private_project_access: i.private_project_access,
  };
}

const SELECT = `select i.id, i.organization_id, i.target_email, i.first_name, i.level, i.message, i.private_project_access,
    i.emailing_attempt_made, i.created_at, i.updated_at, ${prefixedUserColumns('u', 'by_')}
  from organization_invites i left join users u on u.id = i.created_by_id`;

function toRow(r: Record<string, unknown>): InviteRow {
  return {
    id: r.id as string,
    organization_id: r.organization_id as string,
    target_email: r.target_email as string,
    first_name: r.first_name as string,
    level: r.level as number,
    message: r.message as string | null,
    private_project_access: r.private_project_access as ProjectAccess[],
    emailing_attempt_made: r.emailing_attempt_made as boolean,
    created_at: r.created_at as Date,
    updated_at: r.updated_at as Date,
    created_by: prefixedUser(r, 'by_'),
  };
}

export async function listInvites(
  db: Queryable,
  organizationId: string,
  page: { limit: number; offset: number },
): Promise<{ count: number; rows: InviteRow[] }> {
  const count = await db.query<{ count: string }>('select count(*) from organization_invites where organization_id = $1', [organizationId]);
  const { rows } = await db.query<Record<string, unknown>>(
    `${SELECT} where i.organization_id = $1 order by i.created_at desc, i.id desc limit $2 offset $3`,
    [organizationId, page.limit, page.offset],
  );
  return { count: Number(count.rows[0]!.count), rows: rows.map(toRow) };
}

export async function findInvite(db: Queryable, organizationId: string, id: string): Promise<InviteRow | undefined> {
  const { rows } = await db.query<Record<string, unknown>>(`${SELECT} where i.organization_id = $1 and i.id = $2`, [organizationId, id]);
  return rows[0] ? toRow(rows[0]) : undefined;
}

/** Pending invites for this address (any case), oldest first. */
export async function invitesForEmail(db: Queryable, organizationId: string, email: string): Promise<InviteRow[]> {
  const { rows } = await db.query<Record<string, unknown>>(
    `${SELECT} where i.organization_id = $1 and lower(i.target_email) = lower($2) order by i.created_at, i.id`,
    [organizationId, email],
  );
  return rows.map(toRow);
}

export interface NewInvite {
  target_email: string;
  first_name: string;
  level: number;
  message: string | null;
  private_project_access: ProjectAccess[];
  emailing_attempt_made: boolean;
}

/** Replaces every earlier invite of the address in this organization with a new one. */
export async function replaceInvite(db: Queryable, organizationId: string, createdBy: number, invite: NewInvite): Promise<InviteRow> {
  await db.query('delete from organization_invites where organization_id = $1 and lower(target_email) = lower($2)', [
    organizationId,
    invite.target_email,
  ]);
  const { rows } = await db.query<{ id: string }>(
    `insert into organization_invites
       (organization_id, target_email, first_name, level, message, private_project_access, emailing_attempt_made, created_by_id)
     values ($1, $2, $3, $4, $5, $6, $7, $8) returning id`,
    [
      organizationId,
      invite.target_email,
      invite.first_name,
      invite.level,
      invite.message,
      JSON.stringify(invite.private_project_access),
      invite.emailing_attempt_made,
      createdBy,
    ],
  );
  return (await findInvite(db, organizationId, rows[0]!.id))!;
}

export async function deleteInvite(db: Queryable, organizationId: string, id: string): Promise<boolean> {
  const { rowCount } = await db.query('delete from organization_invites where organization_id = $1 and id = $2', [organizationId, id]);
  return rowCount === 1;
}
