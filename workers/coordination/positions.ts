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

/** First statement of a batch transaction: holds the position row until commit, checks fence and position. */
export async function lockPosition(client: pg.ClientBase, stream: string, shard: number, fence: number, position: number): Promise<void> {
  const { rows } = await client.query<{ position: string; fence: string }>({
    name: 'position-lock',
    text: 'SELECT position, fence FROM shard_positions WHERE stream = $1 AND shard = $2 FOR UPDATE',
    values: [stream, shard],
  });
  const row = rows[0];
  if (!row || Number(row.fence) !== fence || Number(row.position) !== position) await explainMismatch(client, stream, shard, fence, position);
}
