// Set-based SQL for one batch: load (and validate cached) persons in one round trip, lock the
// persons the batch will change in uuid order, and write every change with one statement.
import type pg from 'pg';
import { cleanStrings, type Properties } from '../../lib/index.js';
import { OwnershipLostError, plainArrayLiteral } from '../coordination/index.js';
import type { GroupUpsert, IngestionWarning } from './process-events.js';
import type { PersonCache } from './person-cache.js';
import { distinctIdKey, type PersonState, type PersonWrites } from './person-workspace.js';

/** Another writer changed a person this batch read: redo the batch on fresh state. */
export class PersonConflictError extends Error {
  override name = 'PersonConflictError';
}

interface PersonRow {
  kind: 'v' | 'd';
  project_id: number | null;
  distinct_id: string | null;
  uuid: string;
  /** Null for a cached person that no longer exists. */
  version: number | null;
  person_project: number;
  properties: Properties | null;
  is_identified: boolean | null;
  created_at: Date | null;
}

function toState(row: PersonRow): PersonState {
  return {
    uuid: row.uuid,
    projectId: row.person_project,
    properties: row.properties ?? {},
    isIdentified: row.is_identified ?? false,
    createdAt: (row.created_at ?? new Date(0)).toISOString(),
    version: Number(row.version),
  };
}

export interface LoadedPersons {
  lookups: Map<string, string | null>;
  persons: Map<string, PersonState>;
  cacheHits: number;
  cacheMisses: number;
}

/**
 * Resolves every distinct id key to its person. Cached persons are checked by version in the same
 * query that loads the uncached ones (a changed person comes back whole); a cached person that
 * no longer exists (merged elsewhere) sends its distinct ids to a second lookup.
 */
export async function loadPersons(
  client: pg.ClientBase,
  keys: Iterable<readonly [number, string]>,
  cache: PersonCache,
): Promise<LoadedPersons> {
  const lookups = new Map<string, string | null>();
  const persons = new Map<string, PersonState>();
  const cachedKeys = new Map<string, { key: string; projectId: number; distinctId: string }[]>();
  let toLoad: { key: string; projectId: number; distinctId: string }[] = [];
  const seen = new Set<string>();
  let cacheHits = 0;
  for (const [projectId, distinctId] of keys) {
    const key = distinctIdKey(projectId, distinctId);
    if (seen.has(key)) continue;
    seen.add(key);
    const cached = cache.lookup(key);
    if (cached) {
      cacheHits++;
      let list = cachedKeys.get(cached.uuid);
      if (!list) {
        cachedKeys.set(cached.uuid, (list = []));
        persons.set(cached.uuid, cached);
      }
      list.push({ key, projectId, distinctId });
    } else {
      toLoad.push({ key, projectId, distinctId });
    }
  }
  const cacheMisses = toLoad.length;

  const validate = [...cachedKeys.keys()];
  for (let round = 0; round < 3 && (validate.length > 0 || toLoad.length > 0); round++) {
    // Cached persons come back only when they changed (with their state) or are gone (uuid only):
    // usually no row at all for them.
    const { rows } = await client.query<PersonRow>({
      name: 'persons-load',
      text: `SELECT 'v' AS kind, NULL::int AS project_id, NULL::text AS distinct_id, c.uuid, p.version::float8 AS version,
              p.project_id AS person_project, p.properties, p.is_identified, p.created_at
         FROM unnest($1::uuid[], $2::int8[]) AS c(uuid, version) LEFT JOIN persons p ON p.uuid = c.uuid
        WHERE p.uuid IS NULL OR p.version <> c.version
       UNION ALL
       SELECT 'd', k.project_id, k.distinct_id, p.uuid, p.version::float8, p.project_id, p.properties, p.is_identified, p.created_at
         FROM unnest($3::int[], $4::text[]) AS k(project_id, distinct_id)
         JOIN person_distinct_ids d ON d.project_id = k.project_id AND d.distinct_id = k.distinct_id
         JOIN persons p ON p.uuid = d.person_uuid`,
      values: [
        plainArrayLiteral(validate),
        plainArrayLiteral(validate.map((uuid) => persons.get(uuid)!.version)),
        plainArrayLiteral(toLoad.map((k) => k.projectId)),
        toLoad.map((k) => k.distinctId),
      ],
    });
    const gone = new Set<string>();
    for (const row of rows) {
      if (row.kind === 'v') {
        if (row.version === null) {
          gone.add(row.uuid);
        } else {
          const fresh = toState(row);
          persons.set(row.uuid, fresh);
          cache.remember(cachedKeys.get(row.uuid)![0]!.key, fresh);
        }
      } else {
        const key = distinctIdKey(row.project_id!, row.distinct_id!);
        const fresh = toState(row);
        lookups.set(key, row.uuid);
        persons.set(row.uuid, fresh);
        cache.remember(key, fresh);
      }
    }
    for (const k of toLoad) if (!lookups.has(k.key)) lookups.set(k.key, null);
    const next: typeof toLoad = [];
    for (const uuid of validate) {
      const list = cachedKeys.get(uuid)!;
      if (!gone.has(uuid)) {
        for (const k of list) lookups.set(k.key, uuid);
      } else {
        // Merged away by another worker: its distinct ids now belong to someone else.
        cache.forgetPerson(uuid);
        persons.delete(uuid);
        for (const k of list) {
          cache.forgetDistinctId(k.key);
          next.push(k);
        }
      }
    }
    validate.length = 0;
    toLoad = next;
  }
  if (toLoad.length > 0) throw new PersonConflictError('persons kept changing while being loaded');
  return { lookups, persons, cacheHits, cacheMisses };
}

/** Locks the persons the batch changes, in uuid order (no deadlocks between batches), and checks their versions. */
export async function lockPersons(client: pg.ClientBase, expected: Map<string, number>): Promise<void> {
  if (expected.size === 0) return;
  const uuids = [...expected.keys()].sort();
  const { rows } = await client.query<{ uuid: string; version: number }>({
    name: 'persons-lock',
    text: 'SELECT uuid, version::float8 AS version FROM persons WHERE uuid = ANY($1::uuid[]) ORDER BY uuid FOR UPDATE',
    values: [uuids],
  });
  if (rows.length !== uuids.length) throw new PersonConflictError('a person was merged away by another writer');
  for (const row of rows) {
    if (Number(row.version) !== expected.get(row.uuid)) throw new PersonConflictError(`person ${row.uuid} changed concurrently`);
  }
}

// writeBatch's rows, made by functions that live as long as the process: a callback made per
// batch would be compiled again after every major GC (batch-codec.ts).
function personRow(p: PersonState) {
  return {
    uuid: p.uuid,
    project_id: p.projectId,
    properties: p.properties,
    is_identified: p.isIdentified,
    created_at: p.createdAt,
    version: p.version,
  };
}

function updateRow(u: PersonWrites['updates'][number]) {
  return { ...personRow(u.state), expected: u.expectedVersion };
}

export interface PositionCommit {
  stream: string;
  shard: number;
  fence: number;
  position: number;
  /** End of the next batch, already buffered: planned with this commit, so it needs no write of its own. */
  nextPlannedEnd?: number;
}

/**
 * Every person write of a batch in one statement: persons inserted, updated (version-checked),
 * deleted (merged away), distinct ids moved and added, warnings stored, and the shard position
 * advanced under the fence.
 */
export async function writeBatch(
  client: pg.ClientBase,
  w: PersonWrites,
  warnings: readonly IngestionWarning[],
  /** Every partition whose batch the transaction holds (usually one). */
  positions: PositionCommit | readonly PositionCommit[],
): Promise<void> {
  const moved = Array.isArray(positions) ? (positions as readonly PositionCommit[]) : [positions as PositionCommit];
  // Rows travel as one JSON document per table: serialised once, parsed once by PostgreSQL, where
  // jsonb[] parameters would be escaped element by element on both sides.
  const { rows } = await client.query<Record<string, number>>({
    name: 'batch-write',
    text: `WITH
     ins_p AS (
       INSERT INTO persons (uuid, project_id, properties, is_identified, created_at, version)
       SELECT uuid, project_id, properties, is_identified, created_at, version
         FROM json_to_recordset($1::json)
           AS x(uuid uuid, project_id int, properties jsonb, is_identified bool, created_at timestamptz, version int8)
       ON CONFLICT (uuid) DO NOTHING RETURNING 1),
     upd_p AS (
       UPDATE persons p SET properties = u.properties, is_identified = u.is_identified, created_at = u.created_at, version = u.version, updated_at = now()
       FROM json_to_recordset($2::json)
         AS u(uuid uuid, properties jsonb, is_identified bool, created_at timestamptz, version int8, expected int8)
       WHERE p.uuid = u.uuid AND p.version = u.expected RETURNING 1),
     del_p AS (
       DELETE FROM persons p USING unnest($3::uuid[], $4::int8[]) AS d(uuid, expected)
       WHERE p.uuid = d.uuid AND p.version = d.expected RETURNING 1),
     mv AS (
       UPDATE person_distinct_ids pd SET person_uuid = m.to_uuid, version = pd.version + 1, updated_at = now()
       FROM unnest($5::uuid[], $6::uuid[]) AS m(from_uuid, to_uuid)
       WHERE pd.person_uuid = m.from_uuid RETURNING 1),
     ins_d AS (
       INSERT INTO person_distinct_ids (project_id, distinct_id, person_uuid)
       SELECT * FROM unnest($7::int[], $8::text[], $9::uuid[])
       ON CONFLICT DO NOTHING RETURNING 1),
     warn AS (
       INSERT INTO ingestion_warnings (project_id, type, details)
       SELECT project_id, type, details FROM json_to_recordset($10::json) AS x(project_id int, type text, details jsonb) RETURNING 1),
     pos AS (
       UPDATE shard_positions s SET position = p.position, pending_end = p.next_end, updated_at = now()
       FROM unnest($11::text[], $12::int[], $13::int8[], $14::int8[], $15::int8[]) AS p(stream, shard, position, fence, next_end)
       WHERE s.stream = p.stream AND s.shard = p.shard AND s.fence = p.fence RETURNING 1)
     SELECT (SELECT count(*) FROM ins_p)::int AS ins_p, (SELECT count(*) FROM upd_p)::int AS upd_p,
            (SELECT count(*) FROM del_p)::int AS del_p, (SELECT count(*) FROM ins_d)::int AS ins_d,
            (SELECT count(*) FROM warn)::int AS warn,
            (SELECT count(*) FROM pos)::int AS pos, (SELECT count(*) FROM mv)::int AS mv`,
    values: [
      JSON.stringify(w.inserts.map(personRow)),
      JSON.stringify(w.updates.map(updateRow)),
      plainArrayLiteral(w.deletes.map((d) => d.uuid)),
      plainArrayLiteral(w.deletes.map((d) => d.expectedVersion)),
      plainArrayLiteral(w.moves.map((m) => m.from)),
      plainArrayLiteral(w.moves.map((m) => m.to)),
      plainArrayLiteral(w.newDistinctIds.map((d) => d.projectId)),
      w.newDistinctIds.map((d) => d.distinctId),
      plainArrayLiteral(w.newDistinctIds.map((d) => d.personUuid)),
      // Details quote what was received (a malformed line may hold a NUL): storable, or the batch could never commit.
      JSON.stringify(warnings.map((x) => ({ project_id: x.projectId, type: x.type, details: cleanStrings(x.details) }))),
      moved.map((p) => p.stream),
      moved.map((p) => p.shard),
      moved.map((p) => p.position),
      moved.map((p) => p.fence),
      moved.map((p) => p.nextPlannedEnd ?? null),
    ],
  });
  const r = rows[0]!;
  if (r.pos !== moved.length) {
    throw new OwnershipLostError(`${moved.map((p) => `${p.stream}/${p.shard}`).join(', ')}: fence ${moved.map((p) => p.fence).join(', ')} no longer current`);
  }
  if (r.ins_p !== w.inserts.length || r.upd_p !== w.updates.length || r.del_p !== w.deletes.length || r.ins_d !== w.newDistinctIds.length) {
    throw new PersonConflictError(
      `concurrent person change: inserted ${r.ins_p}/${w.inserts.length}, updated ${r.upd_p}/${w.updates.length}, ` +
        `deleted ${r.del_p}/${w.deletes.length}, distinct ids ${r.ins_d}/${w.newDistinctIds.length}`,
    );
  }
}

/** Warnings found after the batch's writes (groups refused by the size cap), in the batch's transaction. */
export async function insertWarnings(client: pg.ClientBase, warnings: readonly IngestionWarning[]): Promise<void> {
  if (warnings.length === 0) return;
  await client.query({
    name: 'warnings-insert',
    text: `INSERT INTO ingestion_warnings (project_id, type, details)
     SELECT project_id, type, details FROM json_to_recordset($1::json) AS x(project_id int, type text, details jsonb)`,
    values: [JSON.stringify(warnings.map((x) => ({ project_id: x.projectId, type: x.type, details: cleanStrings(x.details) })))],
  });
}

/**
 * Groups: a shallow merge in SQL (no read needed); created_at is kept. Rows come sorted, so
 * concurrent writers lock them in one order. A merge that would make a group's properties larger
 * than `maxBytes` (as JSON text) is not made: those groups are returned.
 */
export async function upsertGroups(client: pg.ClientBase | pg.Pool, groups: readonly GroupUpsert[], maxBytes: number): Promise<GroupUpsert[]> {
  if (groups.length === 0) return [];
  const { rows } = await client.query<{ project_id: number; group_type_index: number; group_key: string }>({
    name: 'groups-upsert',
    text: `INSERT INTO groups (project_id, group_type_index, group_key, group_properties, created_at)
     SELECT project_id, group_type_index, group_key, group_properties, created_at
       FROM json_to_recordset($1::json)
         AS x(project_id int, group_type_index int2, group_key text, group_properties jsonb, created_at timestamptz)
     ON CONFLICT (project_id, group_type_index, group_key) DO UPDATE
       SET group_properties = groups.group_properties || excluded.group_properties, updated_at = now(), version = groups.version + 1
       WHERE octet_length((groups.group_properties || excluded.group_properties)::text) <= $2
     RETURNING project_id, group_type_index, group_key`,
    values: [
      JSON.stringify(
        groups.map((g) => ({
          project_id: g.projectId,
          group_type_index: g.groupTypeIndex,
          group_key: g.groupKey,
          group_properties: g.properties,
          created_at: g.createdAt,
        })),
      ),
      maxBytes,
    ],
  });
  if (rows.length === groups.length) return [];
  const written = new Set(rows.map((r) => `${r.project_id}:${r.group_type_index}:${r.group_key}`));
  return groups.filter((g) => !written.has(`${g.projectId}:${g.groupTypeIndex}:${g.groupKey}`));
}
