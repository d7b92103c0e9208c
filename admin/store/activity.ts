// The activity log: who changed which plugin, plugin config or batch export, what, and when.
// The activity endpoints answer with an empty body (as the interface says); the log is kept for
// operators and for a later activity API.
import type { Queryable } from '../db/pool.js';

export type ActivityScope = 'Plugin' | 'PluginConfig' | 'BatchExport';

export interface Change {
  field: string;
  before: unknown;
  after: unknown;
}

export interface Activity {
  organizationId: string;
  teamId?: number | null;
  userId: number;
  scope: ActivityScope;
  itemId: string | number;
  activity: string;
  name?: string;
  changes?: Change[];
  extra?: Record<string, unknown>;
}

export async function logActivity(db: Queryable, a: Activity): Promise<void> {
  await db.query(
    `insert into activity_log (organization_id, team_id, user_id, scope, item_id, activity, detail)
     values ($1, $2, $3, $4, $5, $6, $7)`,
    [
      a.organizationId,
      a.teamId ?? null,
      a.userId,
      a.scope,
      String(a.itemId),
      a.activity,
      JSON.stringify({ name: a.name ?? null, changes: a.changes ?? [], ...a.extra }),
    ],
  );
}

/** Fields whose value differs between `before` and `after` (compared as JSON). */
export function changesBetween(
  before: Record<string, unknown>,
  after: Record<string, unknown>,
  fields: readonly string[],
  masked: ReadonlySet<string> = new Set(),
): Change[] {
  const out: Change[] = [];
  for (const field of fields) {
    if (JSON.stringify(before[field]) === JSON.stringify(after[field])) continue;
    out.push(masked.has(field) ? { field, before: '(secret)', after: '(secret)' } : { field, before: before[field] ?? null, after: after[field] ?? null });
  }
  return out;
}
