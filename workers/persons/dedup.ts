// Event dedup: an event uuid already processed for its project is skipped. Uuids are stored in
// `event_dedup`, one list partition per generation (= time / window). A batch inserts into the
// current generation and also checks the previous one, so a duplicate is caught for at least one
// window and at most two; expired generations are dropped whole (no DELETE, no vacuum).
import type pg from 'pg';
import { isTransientDbError, plainArrayLiteral } from '../coordination/index.js';

const DEDUP_LOCK = 7_370_617_465_002;

export class DedupGenerations {
  private readonly known = new Set<number>();

  constructor(readonly windowMs: number) {}

  current(now = Date.now()): number {
    return Math.floor(now / this.windowMs);
  }

  /**
   * Creates the partitions of `generations` unless this process made sure before. Batches ask
   * only for theirs, made a window ahead by maintain(), so they rarely take the DDL path.
   */
  async ensure(pool: pg.Pool, ...generations: number[]): Promise<void> {
    if (generations.every((g) => this.known.has(g))) return;
    // Usually another worker made them already: a look at the catalog, no lock to wait for.
    const { rows: attached } = await pool.query<{ name: string }>(
      `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'event_dedup'::regclass AND NOT i.inhdetachpending AND c.relname = ANY($1)`,
      [generations.map((g) => `event_dedup_${g}`)],
    );
    if (attached.length === generations.length) {
      for (const g of generations) this.known.add(g);
      return;
    }
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      // Workers start together: DDL on one partitioned table is serialised so CREATE IF NOT EXISTS cannot race.
      await client.query('SELECT pg_advisory_xact_lock($1)', [DEDUP_LOCK]);
      for (const g of generations) {
        // Created apart and then attached: CREATE TABLE … PARTITION OF locks the whole event_dedup
        // table (every batch in flight, then every new batch, would wait); ATTACH takes a lock
        // batches do not conflict with, and the CHECK spares it a scan.
        await client.query(
          `CREATE TABLE IF NOT EXISTS event_dedup_${g} (LIKE event_dedup INCLUDING ALL, CHECK (generation = ${g}))`,
        );
        const { rows } = await client.query('SELECT 1 FROM pg_inherits WHERE inhrelid = $1::regclass', [`event_dedup_${g}`]);
        if (rows.length === 0) await client.query(`ALTER TABLE event_dedup ATTACH PARTITION event_dedup_${g} FOR VALUES IN (${g})`);
      }
      await client.query('COMMIT');
      for (const g of generations) this.known.add(g);
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  }

  /**
   * Makes the current and the next generation and drops every one older than the previous.
   * Expired generations are detached CONCURRENTLY first: a plain DROP locks the whole event_dedup
   * table, so it waited for every batch in flight and every new batch of every worker waited
   * behind it (a stall each window as long as the slowest batch). A detach still waits for the
   * batches in flight, but holds up nobody. One worker drops at a time (the advisory lock that
   * ensure() also takes, so neither waits on the other inside PostgreSQL); a detach cut short
   * (lock timeout, crash) is finished first on a later call (only one may be pending), and a table
   * left detached is dropped then too. A failed drop is reported, not thrown: the next call retries.
   */
  async maintain(pool: pg.Pool, now = Date.now()): Promise<DedupUpkeep> {
    const generation = this.current(now);
    await this.ensure(pool, generation, generation + 1);
    const upkeep: DedupUpkeep = { dropped: [], failed: [], busy: false };
    const client = await pool.connect();
    let broken = false;
    try {
      const { rows: lock } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [DEDUP_LOCK]);
      if (!lock[0]!.ok) return { ...upkeep, busy: true };
      try {
        const { rows } = await client.query<{ name: string; attached: boolean; pending: boolean }>(
          `SELECT c.relname AS name, i.inhrelid IS NOT NULL AS attached, coalesce(i.inhdetachpending, false) AS pending
             FROM pg_class c LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
            WHERE c.relkind = 'r' AND c.relname ~ '^event_dedup_[0-9]+$' AND pg_table_is_visible(c.oid)
            ORDER BY pending DESC, c.relname`,
        );
        for (const { name, attached, pending } of rows) {
          const g = Number(name.slice('event_dedup_'.length));
          if (g >= generation - 1) continue;
          try {
            // Neither can run inside a transaction block: each is a statement of its own.
            if (attached) await client.query(`ALTER TABLE event_dedup DETACH PARTITION ${name} ${pending ? 'FINALIZE' : 'CONCURRENTLY'}`);
            await client.query(`DROP TABLE IF EXISTS ${name}`);
            this.known.delete(g);
            upkeep.dropped.push(g);
          } catch (err) {
            if (isTransientDbError(err)) throw err;
            upkeep.failed.push({ generation: g, error: err instanceof Error ? err.message : String(err) });
          }
        }
      } finally {
        await client.query('SELECT pg_advisory_unlock($1)', [DEDUP_LOCK]);
      }
    } catch (err) {
      broken = isTransientDbError(err);
      throw err;
    } finally {
      client.release(broken);
    }
    return upkeep;
  }
}

export interface DedupUpkeep {
  dropped: number[];
  /** Generations whose detach or drop failed this time; the next call tries again. */
  failed: { generation: number; error: string }[];
  /** Another worker was dropping generations: this call dropped none. */
  busy: boolean;
}

export function dedupKey(projectId: number, uuid: string): string {
  return `${projectId}:${uuid.toLowerCase()}`;
}

/**
 * The common case, cheapest: records the batch's (project, uuid) pairs (already unique; uuids
 * checked by isUuid) and returns true when none was seen before. False means some were: the
 * caller rolls the transaction back and uses recordEvents, which says which. Runs inside the
 * batch transaction, so a batch that rolls back leaves no trace.
 *
 * A plain INSERT: a uuid already in this generation fails it on the primary key (23505), which
 * answers "not all new" as well as ON CONFLICT DO NOTHING's short row count would, without its
 * speculative insertion (measured: 4.8 against 6.9 µs of PostgreSQL per uuid, batches of 2,000).
 * A concurrent batch inserting the same uuid makes this one wait for it, then fail if it committed.
 */
export async function recordNewEvents(client: pg.ClientBase, generation: number, projectIds: number[], uuids: string[]): Promise<boolean> {
  if (uuids.length === 0) return true;
  try {
    const { rowCount } = await client.query({
      name: 'dedup-record-new',
      text: `INSERT INTO event_dedup (generation, project_id, uuid)
       SELECT $3, i.project_id, i.uuid FROM unnest($1::int[], $2::uuid[]) AS i(project_id, uuid)
       WHERE NOT EXISTS (SELECT 1 FROM event_dedup d WHERE d.generation = $4 AND d.project_id = i.project_id AND d.uuid = i.uuid)`,
      values: [plainArrayLiteral(projectIds), plainArrayLiteral(uuids), generation, generation - 1],
    });
    return rowCount === uuids.length;
  } catch (err) {
    if (isDedupKeyTaken(err)) return false;
    throw err;
  }
}

function isDedupKeyTaken(err: unknown): boolean {
  const e = err as { code?: string; table?: string } | undefined;
  // The violation names the partition (event_dedup_<generation>), not the parent.
  return e?.code === '23505' && (e.table ?? '').startsWith('event_dedup');
}

/**
 * Records the batch's (project, uuid) pairs (already unique; uuids checked by isUuid) and returns
 * the keys of those seen before: the duplicates (few, so little comes back over the wire). Costs
 * PostgreSQL about a third more than recordNewEvents.
 */
export async function recordEvents(
  client: pg.ClientBase,
  generation: number,
  projectIds: number[],
  uuids: string[],
): Promise<Set<string>> {
  if (uuids.length === 0) return new Set();
  const { rows } = await client.query<{ project_id: number; uuid: string }>({
    name: 'dedup-record',
    text: `WITH input AS (SELECT * FROM unnest($1::int[], $2::uuid[]) AS t(project_id, uuid)),
     inserted AS (
       INSERT INTO event_dedup (generation, project_id, uuid)
       SELECT $3, i.project_id, i.uuid FROM input i
       WHERE NOT EXISTS (SELECT 1 FROM event_dedup d WHERE d.generation = $4 AND d.project_id = i.project_id AND d.uuid = i.uuid)
       ON CONFLICT DO NOTHING
       RETURNING project_id, uuid
     )
     SELECT i.project_id, i.uuid FROM input i LEFT JOIN inserted n ON n.project_id = i.project_id AND n.uuid = i.uuid
     WHERE n.uuid IS NULL`,
    values: [plainArrayLiteral(projectIds), plainArrayLiteral(uuids), generation, generation - 1],
  });
  return new Set(rows.map((r) => dedupKey(r.project_id, r.uuid)));
}
