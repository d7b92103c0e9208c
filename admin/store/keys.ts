// Personal API keys: only the SHA-256 hash and a mask are stored; the key itself is shown once.
import { generatePersonalApiKey, hashPersonalApiKey, maskPersonalApiKey } from '../auth/keys.js';
import type { Queryable } from '../db/pool.js';

export interface KeyWithUser {
  key_id: string;
  scopes: string[];
  scoped_organizations: string[] | null;
  last_used_at: Date | null;
  user_id: number;
  user_uuid: string;
}

export async function findKeyByValue(db: Queryable, key: string): Promise<KeyWithUser | undefined> {
  const { rows } = await db.query<KeyWithUser>(
    `select k.id as key_id, k.scopes, k.scoped_organizations, k.last_used_at, u.id as user_id, u.uuid as user_uuid
     from personal_api_keys k join users u on u.id = k.user_id
     where k.secure_value = $1`,
    [hashPersonalApiKey(key)],
  );
  return rows[0];
}

/** Records use at most once an hour, so reads do not turn into a write per request. */
export async function touchKey(db: Queryable, keyId: string): Promise<void> {
  await db.query(
    `update personal_api_keys set last_used_at = now()
     where id = $1 and (last_used_at is null or last_used_at < now() - interval '1 hour')`,
    [keyId],
  );
}

export async function createPersonalApiKey(
  db: Queryable,
  userId: number,
  options: { scopes: readonly string[]; scopedOrganizations: readonly string[] | null; label: string },
): Promise<{ id: string; key: string }> {
  const key = generatePersonalApiKey();
  const { rows } = await db.query<{ id: string }>(
    `insert into personal_api_keys (user_id, label, secure_value, mask_value, scopes, scoped_organizations)
     values ($1, $2, $3, $4, $5, $6) returning id`,
    [userId, options.label, hashPersonalApiKey(key), maskPersonalApiKey(key), options.scopes, options.scopedOrganizations],
  );
  return { id: rows[0]!.id, key };
}

export async function keyExists(db: Queryable, keyId: string, key: string): Promise<boolean> {
  const { rowCount } = await db.query('select 1 from personal_api_keys where id = $1 and secure_value = $2', [keyId, hashPersonalApiKey(key)]);
  return rowCount === 1;
}
