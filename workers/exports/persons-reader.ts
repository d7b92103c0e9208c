// The persons model (docs/exports.md, "Persons"): one record per distinct id of the project
// whose person or distinct-id row changed in [from, to) (a backfill: everything changed before
// `to`, the latest state), read from the workers' tables in pages by distinct id, so memory
// holds one page.
import type pg from 'pg';
import type { PersonRecord } from './records.js';

export const PERSONS_PAGE = 5_000;

export async function* readPersons(db: pg.Pool, teamId: number, fromMs: number | null, toMs: number, signal: AbortSignal): AsyncGenerator<PersonRecord[]> {
  let after = '';
  for (;;) {
    signal.throwIfAborted();
    const { rows } = await db.query<{
      distinct_id: string;
      person_uuid: string;
      properties: Record<string, unknown>;
      person_version: string;
      distinct_id_version: string;
      created_at: Date;
      changed_at: Date;
    }>(
      `SELECT d.distinct_id, d.person_uuid, p.properties, p.version AS person_version, d.version AS distinct_id_version, p.created_at,
              greatest(p.updated_at, d.updated_at) AS changed_at
       FROM person_distinct_ids d JOIN persons p ON p.uuid = d.person_uuid
       WHERE d.project_id = $1 AND d.distinct_id > $2
         AND greatest(p.updated_at, d.updated_at) < $4 AND ($3::timestamptz IS NULL OR greatest(p.updated_at, d.updated_at) >= $3)
       ORDER BY d.distinct_id LIMIT $5`,
      [teamId, after, fromMs === null ? null : new Date(fromMs), new Date(toMs), PERSONS_PAGE],
    );
    if (rows.length === 0) return;
    after = rows[rows.length - 1]!.distinct_id;
    yield rows.map((r) => ({
      team_id: teamId,
      distinct_id: r.distinct_id,
      person_id: r.person_uuid,
      properties: r.properties,
      person_version: Number(r.person_version),
      person_distinct_id_version: Number(r.distinct_id_version),
      createdAtUs: r.created_at.getTime() * 1000,
      is_deleted: false,
      insertedAtUs: r.changed_at.getTime() * 1000,
    }));
    if (rows.length < PERSONS_PAGE) return;
  }
}
