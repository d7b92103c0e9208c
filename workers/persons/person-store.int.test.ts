// Per-batch queries against a real PostgreSQL holding many persons and dedup rows: a batch must
// cost what its own keys cost, not what the tables hold. Left to itself, the planner hashed the
// whole persons table for every batch of a few hundred keys (workers/db.ts beginBatch). Dedup's
// statements probe the previous generation by themselves at these sizes: checked all the same.
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, uuidv7 } from '../../lib/index.js';
import { freshDatabase } from '../../test/kit/index.js';
import { beginBatch, createPool } from '../coordination/db.js';
import { DedupGenerations, recordEvents, recordNewEvents } from './dedup.js';
import { migrateWorkerSchema } from '../migrate.js';
import { PersonCache } from './person-cache.js';
import { loadPersons, lockPersons, writeBatch } from './person-store.js';
import { distinctIdKey, type PersonWrites } from './person-workspace.js';
import { takeOverPartition } from '../coordination/positions.js';

const PROJECT = 7;
const PERSONS = 50_000;
let pool: pg.Pool;
const logger = createLogger('test', 'warn');

beforeAll(async () => {
  const url = await freshDatabase();
  await migrateWorkerSchema(url, logger);
  pool = createPool(url, 2, logger);
  // Person n has the distinct id "user-n" and a uuid derived from n.
  await pool.query(
    `INSERT INTO persons (uuid, project_id, properties, created_at, version)
     SELECT md5('p' || n)::uuid, $1, jsonb_build_object('n', n), now(), 1 FROM generate_series(1, $2) AS n`,
    [PROJECT, PERSONS],
  );
  await pool.query(
    `INSERT INTO person_distinct_ids (project_id, distinct_id, person_uuid)
     SELECT $1, 'user-' || n, md5('p' || n)::uuid FROM generate_series(1, $2) AS n`,
    [PROJECT, PERSONS],
  );
  await pool.query('ANALYZE persons, person_distinct_ids');
}, 60_000);

afterAll(async () => {
  await pool?.end();
});

/**
 * Runs `work` in a batch transaction and returns how many rows it read of each table (by scans
 * and through indexes); `check` runs after they are counted, before the transaction is rolled back.
 */
async function rowsReadDuring(
  tables: string[],
  work: (client: pg.PoolClient) => Promise<void>,
  check?: (client: pg.PoolClient) => Promise<void>,
): Promise<Record<string, number>> {
  const client = await pool.connect();
  // This session's counts not yet reported (pg_stat_xact_*, so other sessions cannot disturb them);
  // they may include earlier transactions of the session, hence before and after.
  const counts = async () => {
    const { rows } = await client.query<{ relname: string; n: string }>(
      'SELECT relname, seq_tup_read + coalesce(idx_tup_fetch, 0) AS n FROM pg_stat_xact_user_tables WHERE relname = ANY($1)',
      [tables],
    );
    return Object.fromEntries(tables.map((t) => [t, Number(rows.find((r) => r.relname === t)?.n ?? 0)]));
  };
  try {
    await beginBatch(client);
    const before = await counts();
    await work(client);
    const after = await counts();
    await check?.(client);
    await client.query('ROLLBACK');
    return Object.fromEntries(tables.map((t) => [t, after[t]! - before[t]!]));
  } finally {
    client.release();
  }
}

describe('per-batch queries on large tables', () => {
  it('loadPersons - validates 2,000 cached persons and finds 500 uncached ones reading only their rows, not 50k', async () => {
    const cache = new PersonCache(10_000);
    // Warm the cache the way batches do: a first load of persons 1..2000.
    const warm = Array.from({ length: 2_000 }, (_, i) => [PROJECT, `user-${i + 1}`] as const);
    const client = await pool.connect();
    await loadPersons(client, warm, cache).finally(() => client.release());
    expect(cache.size).toBe(2_000);
    // Another writer changes one cached person: it must come back fresh.
    await pool.query(`UPDATE persons SET version = 2, properties = '{"changed":true}' WHERE uuid = md5('p5')::uuid`);

    const keys = [
      ...warm,
      ...Array.from({ length: 500 }, (_, i) => [PROJECT, `user-${10_001 + i}`] as const),
      [PROJECT, 'nobody'] as const,
    ];
    let loaded: Awaited<ReturnType<typeof loadPersons>> | undefined;
    const read = await rowsReadDuring(['persons', 'person_distinct_ids'], async (client) => {
      loaded = await loadPersons(client, keys, cache);
    });
    // 2,000 cached persons checked and 500 found (of 50k): each row read once, give or take.
    expect(read.persons).toBeGreaterThanOrEqual(2_500);
    expect(read.persons).toBeLessThan(3_000);
    expect(read.person_distinct_ids).toBeLessThan(1_000);
    expect(loaded!.cacheHits).toBe(2_000);
    expect(loaded!.cacheMisses).toBe(501);
    expect(loaded!.lookups.get(distinctIdKey(PROJECT, 'user-10500'))).toBeDefined();
    expect(loaded!.lookups.get(distinctIdKey(PROJECT, 'nobody'))).toBeNull();
    const changed = loaded!.persons.get(loaded!.lookups.get(distinctIdKey(PROJECT, 'user-5'))!)!;
    expect(changed).toMatchObject({ version: 2, properties: { changed: true } });
  });

  it('lockPersons and writeBatch - 1,000 updates, 300 merges and 500 new distinct ids read only their rows', async () => {
    const uuidOf = async (n: number) => (await pool.query<{ u: string }>(`SELECT md5('p' || $1::int)::uuid AS u`, [n])).rows[0]!.u;
    const updates = await Promise.all(Array.from({ length: 1_000 }, (_, i) => uuidOf(20_001 + i)));
    const merged = await Promise.all(Array.from({ length: 300 }, (_, i) => uuidOf(30_001 + i)));
    const { fence } = await takeOverPartition(pool, 'EVENTS', 3, 'test', 'created');
    const writes: PersonWrites = {
      inserts: [],
      updates: updates.map((uuid) => ({
        state: { uuid, projectId: PROJECT, properties: { updated: true }, isIdentified: true, createdAt: new Date().toISOString(), version: 2 },
        expectedVersion: 1,
      })),
      deletes: merged.map((uuid) => ({ uuid, expectedVersion: 1 })),
      newDistinctIds: Array.from({ length: 500 }, (_, i) => ({ projectId: PROJECT, distinctId: `new-${i}`, personUuid: updates[i]! })),
      moves: merged.map((from, i) => ({ from, to: updates[i]! })),
      mappings: new Map(),
      written: [],
      deleted: [],
    };
    const expected = new Map([...updates, ...merged].map((uuid) => [uuid, 1]));
    const read = await rowsReadDuring(['persons', 'person_distinct_ids'], async (client) => {
      await lockPersons(client, expected);
      await writeBatch(client, writes, [], { stream: 'EVENTS', shard: 3, fence, position: 10 });
    }, async (client) => {
      const { rows } = await client.query<{ n: string }>(
        `SELECT count(*) AS n FROM person_distinct_ids WHERE person_uuid = ANY($1::uuid[])`,
        [updates],
      );
      // Each updated person keeps its own id, 300 gain a merged person's, 500 gain a new one.
      expect(Number(rows[0]!.n)).toBe(1_000 + 300 + 500);
    });
    // 1,300 persons locked, then 1,000 updated and 300 deleted; 300 distinct ids moved (of 50k each).
    expect(read.persons).toBeLessThan(4_000);
    expect(read.person_distinct_ids).toBeLessThan(1_000);
  });

  it('pool - its sessions plan no parallel workers, even where PostgreSQL would use them', async () => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      // Parallelism made free: the planner would gather a scan of persons (50k rows) from parallel workers.
      await client.query('SET LOCAL parallel_setup_cost = 0; SET LOCAL parallel_tuple_cost = 0; SET LOCAL min_parallel_table_scan_size = 0');
      const plan = async () => JSON.stringify((await client.query('EXPLAIN (FORMAT JSON) SELECT count(*) FROM persons')).rows);
      expect(await plan()).not.toMatch(/Gather/);
      // PostgreSQL's default in the same session does (so the check above can fail).
      await client.query('SET LOCAL max_parallel_workers_per_gather = 2');
      expect(await plan()).toMatch(/Gather/);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });

  it('dedup - a batch checks the previous generation (200k rows) by index, reading none of it', async () => {
    const dedup = new DedupGenerations(60_000);
    const generation = dedup.current();
    await dedup.ensure(pool, generation - 1, generation);
    // Never vacuumed, so an index-only scan has to visit the table and shows in the rows read.
    await pool.query(`ALTER TABLE event_dedup_${generation - 1} SET (autovacuum_enabled = off)`);
    await pool.query(
      `INSERT INTO event_dedup (generation, project_id, uuid) SELECT $1, $2, gen_random_uuid() FROM generate_series(1, 200000)`,
      [generation - 1, PROJECT],
    );
    await pool.query(`ANALYZE event_dedup_${generation - 1}`);
    const uuids = Array.from({ length: 2_000 }, () => uuidv7());
    const projects = uuids.map(() => PROJECT);
    const previous = `event_dedup_${generation - 1}`;
    const cheap = await rowsReadDuring([previous], async (client) => {
      expect(await recordNewEvents(client, generation, projects, uuids)).toBe(true);
    });
    const exact = await rowsReadDuring([previous], async (client) => {
      expect((await recordEvents(client, generation, projects, uuids)).size).toBe(0);
    });
    expect({ cheap, exact }).toEqual({ cheap: { [previous]: 0 }, exact: { [previous]: 0 } });
  });
});
