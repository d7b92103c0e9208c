// Fences and dedup generations against a real PostgreSQL.
import { readdirSync } from 'node:fs';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger, uuidv7 } from '../../lib/index.js';
import { freshDatabase, waitFor } from '../../test/kit/index.js';
import { beginBatch, createPool } from './db.js';
import { DedupGenerations, recordEvents, recordNewEvents } from '../persons/dedup.js';
import { migrateWorkerSchema } from '../migrate.js';
import { OwnershipLostError } from './failures.js';
import { lockPosition, planBatch, PositionMovedError, takeOverPartition } from './positions.js';

let pool: pg.Pool;
const logger = createLogger('test', 'warn');

beforeAll(async () => {
  const url = await freshDatabase();
  // Several workers migrate at once: one applies, the others wait and find nothing to do.
  const runs = await Promise.all([migrateWorkerSchema(url, logger), migrateWorkerSchema(url, logger), migrateWorkerSchema(url, logger)]);
  const migrations = readdirSync(new URL('../migrations/', import.meta.url)).filter((n) => /^\d+_[\w-]+\.ts$/.test(n));
  expect(runs.map((r) => r.length).sort()).toEqual([0, 0, migrations.length]);
  pool = createPool(url, 4, logger);
});

afterAll(async () => {
  await pool?.end();
});

describe('positions and dedup', () => {
  it('fence - a new owner raises the fence; the former owner can neither plan nor commit', async () => {
    const a = await takeOverPartition(pool, 'EVENTS', 1, 'a', 'created-1');
    expect(a).toMatchObject({ position: 0, pendingEnd: undefined, reset: false });
    await planBatch(pool, 'EVENTS', 1, a.fence, 0, 1, 10);
    const b = await takeOverPartition(pool, 'EVENTS', 1, 'b', 'created-1');
    expect(b.fence).toBeGreaterThan(a.fence);
    // The planned batch is handed over: the new owner replays exactly up to 10.
    expect(b.pendingEnd).toBe(10);
    await expect(planBatch(pool, 'EVENTS', 1, a.fence, 0, 1, 10)).rejects.toBeInstanceOf(OwnershipLostError);
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await expect(lockPosition(client, 'EVENTS', 1, a.fence, 0)).rejects.toBeInstanceOf(OwnershipLostError);
      await client.query('ROLLBACK');
      await client.query('BEGIN');
      await expect(lockPosition(client, 'EVENTS', 1, b.fence, 5)).rejects.toBeInstanceOf(PositionMovedError);
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
  });

  it('plan - another end is refused while a plan stands, unless its owner replaces its own plan by name', async () => {
    const a = await takeOverPartition(pool, 'EVENTS', 4, 'a', 'c');
    await planBatch(pool, 'EVENTS', 4, a.fence, 0, 1, 10);
    // The plan may have been published under: a batch with another end would get other message ids.
    await expect(planBatch(pool, 'EVENTS', 4, a.fence, 0, 1, 20)).rejects.toBeInstanceOf(PositionMovedError);
    await expect(planBatch(pool, 'EVENTS', 4, a.fence, 0, 1, 20, 15)).rejects.toBeInstanceOf(PositionMovedError);
    // Its own plan is only outgrown, never cut short.
    await expect(planBatch(pool, 'EVENTS', 4, a.fence, 0, 1, 5, 10)).rejects.toBeInstanceOf(PositionMovedError);
    // The owner that made plan 10 and published nothing under it grows the batch to 20.
    await planBatch(pool, 'EVENTS', 4, a.fence, 0, 1, 20, 10);
    const b = await takeOverPartition(pool, 'EVENTS', 4, 'b', 'c');
    expect(b.pendingEnd).toBe(20);
    // A former owner cannot replace it, even naming it.
    await expect(planBatch(pool, 'EVENTS', 4, a.fence, 0, 1, 30, 20)).rejects.toBeInstanceOf(OwnershipLostError);
  });

  it('fence - a takeover waits for the batch in flight, then sees all of it', async () => {
    const a = await takeOverPartition(pool, 'EVENTS', 2, 'a', 'c');
    const client = await pool.connect();
    await client.query('BEGIN');
    await lockPosition(client, 'EVENTS', 2, a.fence, 0);
    let tookOver = false;
    const takeover = takeOverPartition(pool, 'EVENTS', 2, 'b', 'c').then((r) => ((tookOver = true), r));
    await new Promise((r) => setTimeout(r, 300));
    expect(tookOver).toBe(false);
    await client.query(`UPDATE shard_positions SET position = 42 WHERE stream = 'EVENTS' AND shard = 2`);
    await client.query('COMMIT');
    client.release();
    expect((await takeover).position).toBe(42);
  });

  it('fence - a re-created stream starts again from its beginning', async () => {
    await takeOverPartition(pool, 'HISTORICAL', 3, 'a', 'first');
    await pool.query(`UPDATE shard_positions SET position = 99 WHERE stream = 'HISTORICAL' AND shard = 3`);
    expect(await takeOverPartition(pool, 'HISTORICAL', 3, 'a', 'first')).toMatchObject({ position: 99, reset: false });
    expect(await takeOverPartition(pool, 'HISTORICAL', 3, 'a', 'second')).toMatchObject({ position: 0, reset: true });
  });

  // The cheap path (true: none seen before) and the exact one (which were) agree on every case.
  const recorders = {
    recordNewEvents: (client: pg.PoolClient, g: number, projects: number[], uuids: string[]) => recordNewEvents(client, g, projects, uuids),
    recordEvents: async (client: pg.PoolClient, g: number, projects: number[], uuids: string[]) =>
      (await recordEvents(client, g, projects, uuids)).size === 0,
  };
  it.each(Object.entries(recorders))('dedup (%s) - a uuid is a duplicate in its generation and the next, per project', async (name, record) => {
    const windowMs = 1_000;
    const dedup = new DedupGenerations(windowMs);
    const g = dedup.current(name === 'recordEvents' ? 10_000_000 : 20_000_000);
    await dedup.ensure(pool, g, g + 1, g + 2);
    const u = '0190a7a0-0000-7000-8000-00000000abcd';
    const fresh = async (generation: number, project = 1, uuids = [u]) => {
      const client = await pool.connect();
      try {
        return await record(client, generation, uuids.map(() => project), uuids);
      } finally {
        client.release();
      }
    };
    expect(await fresh(g)).toBe(true);
    expect(await fresh(g)).toBe(false);
    expect(await fresh(g, 2)).toBe(true);
    expect(await fresh(g + 1)).toBe(false);
    // One seen before among new ones: the whole batch is not "fresh".
    expect(await fresh(g + 1, 1, ['0190a7a0-0000-7000-8000-00000000ab01', u.toUpperCase()])).toBe(false);
    // Two generations on, the first copy is out of the window.
    expect(await fresh(g + 2, 2)).toBe(true);
  });

  it.each(Object.entries(recorders))(
    'dedup (%s) - of two open batches with the same uuid, the second waits for the first and finds it a duplicate once it commits',
    async (name, record) => {
      const dedup = new DedupGenerations(1_000);
      const g = dedup.current(name === 'recordEvents' ? 40_000_000 : 50_000_000);
      await dedup.ensure(pool, g, g + 1);
      const u = uuidv7();
      const [first, second] = [await pool.connect(), await pool.connect()];
      const backendPid = async (c: pg.PoolClient) => (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      const [firstPid, secondPid] = [await backendPid(first), await backendPid(second)];
      try {
        await beginBatch(first);
        expect(await record(first, g, [3], [u])).toBe(true);
        await beginBatch(second);
        let settled = false;
        const waiting = record(second, g, [3], [u]).finally(() => (settled = true));
        await waitFor('the second batch blocked by the first', async () => {
          const { rowCount } = await pool.query('SELECT 1 WHERE $2::int = ANY(pg_blocking_pids($1))', [secondPid, firstPid]);
          return (rowCount ?? 0) > 0;
        });
        expect(settled).toBe(false);
        await first.query('COMMIT');
        expect(await waiting).toBe(false);
      } finally {
        await first.query('ROLLBACK').catch(() => undefined);
        await second.query('ROLLBACK').catch(() => undefined);
        first.release();
        second.release();
      }
    },
  );

  it('dedup - the exact path names the duplicates of a batch; expired generations are dropped whole', async () => {
    const windowMs = 1_000;
    const dedup = new DedupGenerations(windowMs);
    const g = dedup.current(10_000_000);
    const seen = '0190a7a0-0000-7000-8000-0000000000f1';
    const fresh = '0190a7a0-0000-7000-8000-0000000000f2';
    await dedup.ensure(pool, g, g + 1);
    const client = await pool.connect();
    try {
      await recordEvents(client, g, [7], [seen]);
      expect([...(await recordEvents(client, g + 1, [7, 7, 8], [fresh, seen.toUpperCase(), seen]))]).toEqual([`7:${seen}`]);
    } finally {
      client.release();
    }
    const { dropped } = await dedup.maintain(pool, (g + 3) * windowMs);
    expect(dropped).toEqual(expect.arrayContaining([g, g + 1]));
    const { rows } = await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_class WHERE relname = 'event_dedup_${g}'`);
    expect(rows[0]!.n).toBe(0);
  });

  it('dedup - window upkeep (next generation made, expired ones dropped) holds up no batch: one started meanwhile commits while an older one is open', async () => {
    const windowMs = 1_000;
    const dedup = new DedupGenerations(windowMs);
    const g = dedup.current(30_000_000);
    await dedup.ensure(pool, g, g + 1, g + 5);
    // A table an interrupted run detached but never dropped goes too.
    await pool.query(`ALTER TABLE event_dedup DETACH PARTITION event_dedup_${g + 1}`);
    const inFlight = await pool.connect();
    const other = await pool.connect();
    try {
      await openBatch(inFlight, g + 5);
      let maintained = false;
      const maintaining = dedup.maintain(pool, (g + 6) * windowMs).finally(() => (maintained = true));
      maintaining.catch(() => undefined); // awaited below; a rejection must not go unhandled meanwhile
      await waitForDetachWaiting();
      const started = performance.now();
      await openBatch(other, g + 5);
      await other.query('COMMIT');
      expect(performance.now() - started).toBeLessThan(1_000);
      // The detach waits for the batch that was open before it, without holding up anyone else.
      expect(maintained).toBe(false);
      await inFlight.query('COMMIT');
      // Earlier tests' generations (same database) are older still: dropped too.
      const upkeep = await maintaining;
      expect({ ...upkeep, dropped: upkeep.dropped.filter((x) => x >= g) }).toEqual({ dropped: [g, g + 1], failed: [], busy: false });
    } finally {
      inFlight.release();
      other.release();
    }
    const left = await generationTables(g, g + 7);
    // The previous generation, the current one and the next are kept; all older ones are gone.
    expect(left).toEqual([g + 5, g + 6, g + 7]);
  });

  it('dedup - a detach left pending is finished first; two workers upkeeping at once drop each table once, the other reports busy', async () => {
    const windowMs = 1_000;
    const g = new DedupGenerations(windowMs).current(40_000_000);
    await new DedupGenerations(windowMs).ensure(pool, g, g + 1);
    // Leave g + 1 pending: a concurrent detach cut short while a batch held it up.
    const inFlight = await pool.connect();
    const detacher = await pool.connect();
    try {
      await openBatch(inFlight, g + 1);
      const { rows } = await detacher.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      // Its outcome is taken at once: the cancel below rejects it before anything awaits it.
      const detaching = detacher
        .query(`ALTER TABLE event_dedup DETACH PARTITION event_dedup_${g + 1} CONCURRENTLY`)
        .then(() => 'finished', (err: Error) => err.message);
      await waitForDetachWaiting();
      await pool.query('SELECT pg_cancel_backend($1)', [rows[0]!.pid]);
      expect(await detaching).toMatch(/cancel/);
      await inFlight.query('ROLLBACK');
    } finally {
      inFlight.release();
      detacher.release();
    }
    const pending = await pool.query(`SELECT 1 FROM pg_inherits WHERE inhrelid = 'event_dedup_${g + 1}'::regclass AND inhdetachpending`);
    expect(pending.rowCount).toBe(1);

    const [a, b] = await Promise.all([
      new DedupGenerations(windowMs).maintain(pool, (g + 3) * windowMs),
      new DedupGenerations(windowMs).maintain(pool, (g + 3) * windowMs),
    ]);
    // One of them held the lock and dropped both (the pending one first); the other found it held.
    const [worked, skipped] = a.busy ? [b, a] : [a, b];
    expect({ ...worked, dropped: worked.dropped.filter((x) => x >= g) }).toEqual({ dropped: [g + 1, g], failed: [], busy: false });
    expect(skipped).toEqual({ dropped: [], failed: [], busy: true });
    expect(await generationTables(g, g + 1)).toEqual([]);
  });
});

/** Begins a batch transaction that has written a dedup row of `generation` (holds its locks until it ends). */
async function openBatch(client: pg.ClientBase, generation: number): Promise<void> {
  await beginBatch(client);
  expect(await recordNewEvents(client, generation, [7], [uuidv7()])).toBe(true);
}

/** Resolves once a DETACH PARTITION … CONCURRENTLY is waiting for older transactions. */
async function waitForDetachWaiting(): Promise<void> {
  await waitFor(
    'a detach waiting for older transactions',
    async () => {
      const { rowCount } = await pool.query(
        "SELECT 1 FROM pg_stat_activity WHERE query LIKE 'ALTER TABLE event_dedup DETACH PARTITION%' AND wait_event_type = 'Lock'",
      );
      return (rowCount ?? 0) > 0;
    },
    10_000,
    20,
  );
}

/** Generations between `from` and `to` that still have a table, attached or not. */
async function generationTables(from: number, to: number): Promise<number[]> {
  const { rows } = await pool.query<{ name: string }>(`SELECT relname AS name FROM pg_class WHERE relname ~ '^event_dedup_[0-9]+$'`);
  return rows
    .map((r) => Number(r.name.slice('event_dedup_'.length)))
    .filter((x) => x >= from && x <= to)
    .sort((x, y) => x - y);
}
