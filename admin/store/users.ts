// Users: people who hold memberships and personal API keys.
import { randomToken } from '../auth/keys.js';
import type { Queryable } from '../db/pool.js';

export interface UserRow {
  id: number;
  uuid: string;
  distinct_id: string;
  email: string;
  first_name: string;
  last_name: string;
  is_email_verified: boolean;
  hedgehog_config: Record<string, unknown> | null;
}

export interface UserJson {
  id: number;
  uuid: string;
  distinct_id: string;
  first_name: string;
  last_name: string;
  email: string;
  is_email_verified: boolean;
  hedgehog_config: Record<string, unknown> | null;
}

export const USER_COLUMNS = 'u.id, u.uuid, u.distinct_id, u.email, u.first_name, u.last_name, u.is_email_verified, u.hedgehog_config';

export function userJson(u: UserRow): UserJson {
  return {
    id: u.id,
    uuid: u.uuid,
    distinct_id: u.distinct_id,
    first_name: u.first_name,
    last_name: u.last_name,
    email: u.email,
    is_email_verified: u.is_email_verified,
    hedgehog_config: u.hedgehog_config,
  };
}

/** Pulls the `user_*`-prefixed columns of a joined row back into a UserRow. */
export function prefixedUser(row: Record<string, unknown>, prefix: string): UserRow | null {
  if (row[`${prefix}id`] === null || row[`${prefix}id`] === undefined) return null;
  return {
    id: row[`${prefix}id`] as number,
    uuid: row[`${prefix}uuid`] as string,
    distinct_id: row[`${prefix}distinct_id`] as string,
    email: row[`${prefix}email`] as string,
    first_name: row[`${prefix}first_name`] as string,
    last_name: row[`${prefix}last_name`] as string,
    is_email_verified: row[`${prefix}is_email_verified`] as boolean,
    hedgehog_config: row[`${prefix}hedgehog_config`] as Record<string, unknown> | null,
  };
}

export function prefixedUserColumns(alias: string, prefix: string): string {
  return ['id', 'uuid', 'distinct_id', 'email', 'first_name', 'last_name', 'is_email_verified', 'hedgehog_config']
    .map((c) => `${alias}.${c} as ${prefix}${c}`)
    .join(', ');
}

export async function findUserByEmail(db: Queryable, email: string): Promise<UserRow | undefined> {
  const { rows } = await db.query<UserRow>(`select ${USER_COLUMNS} from users u where lower(u.email) = lower($1)`, [email]);
  return rows[0];
}

/** Returns the user with this email (any case), creating it if missing. Safe under concurrency. */
export async function ensureUser(db: Queryable, email: string): Promise<{ user: UserRow; created: boolean }> {
  const inserted = await db.query<UserRow>(
    `insert into users as u (email, distinct_id) values ($1, $2)
     on conflict ((lower(email))) do nothing
     returning ${USER_COLUMNS}`,
    [email, randomToken(32)],
  );
  if (inserted.rows[0]) return { user: inserted.rows[0], created: true };
  const existing = await findUserByEmail(db, email);
  if (!existing) throw new Error(`user ${email} vanished while being created`);
  return { user: existing, created: false };
}
