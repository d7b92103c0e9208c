// Where each (stream, shard) stands, in Postgres (`shard_positions`). A new owner raises the fence
// (a Postgres sequence, so it only grows); every later write of a former owner is refused.
import type pg from 'pg';
import { OwnershipLostError } from './failures.js';

export interface PartitionStart {
  /** Last stream sequence whose effects are committed (0: nothing yet). */
  position: number;
  /** End of a batch that may have been published but not committed: replay exactly up to here. */
  pendingEnd: number | undefined;
  fence: number;
  /** True when the stream was re-created since the position was stored (it starts again at 0). */
  reset: boolean;
}

/**
 * Takes a (stream, shard) over. Waits for the row lock a former owner's batch may hold, so the
 * hand-over sees either all of that batch or none of it.
 */
export async function takeOverPartition(
  pool: pg.Pool,
  stream: string,
  shard: number,
  owner: string,
  streamCreated: string,
): Promise<PartitionStart> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query(
      `INSERT INTO shard_positions (stream, shard, position, stream_created) VALUES ($1, $2, 0, $3)
       ON CONFLICT (stream, shard) DO NOTHING`,
      [stream, shard, streamCreated],
    );
    const before = await client.query<{ position: string; pending_end: string | null; stream_created: string | null }>(
      'SELECT position, pending_end, stream_created FROM shard_positions WHERE stream = $1 AND shard = $2 FOR UPDATE',
      [stream, shard],
    );
    const row = before.rows[0]!;
    const reset = row.stream_created !== null && row.stream_created !== streamCreated;
    const { rows } = await client.query<{ position: string; pending_end: string | null; fence: string }>(
      `UPDATE shard_positions SET fence = nextval('shard_fence'), owner = $3, stream_created = $4, updated_at = now(),
         position = CASE WHEN $5 THEN 0 ELSE position END,
         pending_end = CASE WHEN $5 THEN NULL ELSE pending_end END
       WHERE stream = $1 AND shard = $2
       RETURNING position, pending_end, fence`,
      [stream, shard, owner, streamCreated, reset],
    );
    await client.query('COMMIT');
    const r = rows[0]!;
    return {
      position: Number(r.position),
      pendingEnd: r.pending_end === null ? undefined : Number(r.pending_end),
      fence: Number(r.fence),
      reset,
    };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

/** Records the end of the batch about to be published, before anything of it is published. */
export async function planBatch(
  pool: pg.Pool | pg.ClientBase,
  stream: string,
  shard: number,
  fence: number,
  position: number,
  first: number,
  end: number,
  /** A plan this owner made itself and published nothing under (see persons/batch-planner.ts): it may be replaced. */
  replacing?: number,
): Promise<void> {
  // A different plan is kept unless all of it lies before this batch (its messages expired), or
  // it is the caller's own unused plan, which a batch only outgrows.
  const { rowCount } = await pool.query({
    name: 'position-plan',
    text: `UPDATE shard_positions SET pending_end = $5
     WHERE stream = $1 AND shard = $2 AND fence = $3 AND position = $4
       AND (pending_end IS NULL OR pending_end = $5 OR pending_end < $6 OR (pending_end = $7 AND $5 > $7))`,
    values: [stream, shard, fence, position, end, first, replacing ?? null],
  });
  if (rowCount !== 1) await explainMismatch(pool, stream, shard, fence, position);
}

/** A batch about to be published: planBatch's arguments. */
export interface BatchPlan extends PositionClaim {
  first: number;
  end: number;
  replacing?: number;
}

/** planBatch for several partitions in one statement (a transaction holding their batches). */
export async function planBatches(client: pg.ClientBase, plans: readonly BatchPlan[]): Promise<void> {
  const { rows } = await client.query<{ stream: string; shard: number }>({
    name: 'positions-plan',
    text: `UPDATE shard_positions s SET pending_end = p.end_seq
             FROM unnest($1::text[], $2::int[], $3::int8[], $4::int8[], $5::int8[], $6::int8[], $7::int8[])
               AS p(stream, shard, fence, position, end_seq, first_seq, replacing)
            WHERE s.stream = p.stream AND s.shard = p.shard AND s.fence = p.fence AND s.position = p.position
              AND (s.pending_end IS NULL OR s.pending_end = p.end_seq OR s.pending_end < p.first_seq
                   OR (s.pending_end = p.replacing AND p.end_seq > p.replacing))
           RETURNING s.stream, s.shard`,
    values: [
      plans.map((p) => p.stream),
      plans.map((p) => p.shard),
      plans.map((p) => p.fence),
      plans.map((p) => p.position),
      plans.map((p) => p.end),
      plans.map((p) => p.first),
      plans.map((p) => p.replacing ?? null),
    ],
  });
  const planned = new Set(rows.map((r) => `${r.stream}/${r.shard}`));
  for (const p of plans) if (!planned.has(`${p.stream}/${p.shard}`)) await explainMismatch(client, p.stream, p.shard, p.fence, p.position);
}

/** This worker's own batch committed although it saw an error (e.g. the connection broke during COMMIT). */
export class PositionMovedError extends Error {
  override name = 'PositionMovedError';
}

async function explainMismatch(db: pg.Pool | pg.ClientBase, stream: string, shard: number, fence: number, position: number): Promise<never> {
  const { rows } = await db.query<{ position: string; fence: string }>(
    'SELECT position, fence FROM shard_positions WHERE stream = $1 AND shard = $2',
    [stream, shard],
  );
  const row = rows[0];
  if (row && Number(row.fence) === fence) {
    throw new PositionMovedError(`${stream}/${shard}: position is ${row.position}, expected ${position}`);
  }
  throw new OwnershipLostError(`${stream}/${shard}: fence ${fence} is no longer current`);
}

/** Where a partition's batch starts: its position row must still say so, under this fence. */
export interface PositionClaim {
  stream: string;
  shard: number;
  fence: number;
  position: number;
}

/** First statement of a batch transaction: holds the position row until commit, checks fence and position. */
export async function lockPosition(client: pg.ClientBase, stream: string, shard: number, fence: number, position: number): Promise<void> {
  await lockPositions(client, [{ stream, shard, fence, position }]);
}

/**
 * lockPosition for the partitions of a transaction that holds several partitions' batches, in
 * one statement: rows locked in (stream, shard) order, so two such transactions never wait on
 * each other in a cycle.
 */
export async function lockPositions(client: pg.ClientBase, claims: readonly PositionClaim[]): Promise<void> {
  const { rows } = await client.query<{ stream: string; shard: number; position: string; fence: string }>({
    name: 'positions-lock',
    text: `SELECT s.stream, s.shard, s.position, s.fence FROM shard_positions s
             JOIN unnest($1::text[], $2::int[]) AS c(stream, shard) ON s.stream = c.stream AND s.shard = c.shard
            ORDER BY s.stream, s.shard FOR UPDATE OF s`,
    values: [claims.map((c) => c.stream), claims.map((c) => c.shard)],
  });
  const found = new Map(rows.map((r) => [`${r.stream}/${r.shard}`, r]));
  for (const c of claims) {
    const row = found.get(`${c.stream}/${c.shard}`);
    if (!row || Number(row.fence) !== c.fence || Number(row.position) !== c.position) await explainMismatch(client, c.stream, c.shard, c.fence, c.position);
  }
}

/** Every committed position of `streams`, keyed `<stream>/<shard>` (a partition never taken over has none: 0). */
export async function committedPositions(pool: pg.Pool, streams: readonly string[]): Promise<Map<string, number>> {
  const { rows } = await pool.query<{ stream: string; shard: number; position: string }>(
    'SELECT stream, shard, position FROM shard_positions WHERE stream = ANY($1::text[])',
    [streams],
  );
  return new Map(rows.map((r) => [`${r.stream}/${r.shard}`, Number(r.position)]));
}
