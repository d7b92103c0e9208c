// Ingestion warnings expire: pruning against a real PostgreSQL.
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../lib/index.js';
import { freshDatabase } from '../../test/kit/index.js';
import { createPool } from '../coordination/db.js';
import { migrateWorkerSchema } from '../migrate.js';
import { pruneWarnings } from './warnings.js';

const DAY = 86_400_000;
let pool: pg.Pool;

beforeAll(async () => {
  const url = await freshDatabase();
  await migrateWorkerSchema(url, createLogger('test', 'warn'));
  pool = createPool(url, 2, createLogger('test', 'warn'));
});

afterAll(async () => {
  await pool?.end();
});

async function addWarnings(count: number, ageDays: number, type: string): Promise<void> {
  await pool.query(
    `INSERT INTO ingestion_warnings (project_id, type, details, created_at)
     SELECT 1, $1, '{}', now() - make_interval(days => $2) FROM generate_series(1, $3)`,
    [type, ageDays, count],
  );
}

async function remaining(): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ type: string; n: string }>('SELECT type, count(*) AS n FROM ingestion_warnings GROUP BY type');
  return Object.fromEntries(rows.map((r) => [r.type, Number(r.n)]));
}

describe('ingestion warning retention', () => {
  it('pruneWarnings - deletes warnings older than the retention, oldest first, a chunk per statement and a bounded number per call; keeps newer ones; 0 keeps all', async () => {
    await addWarnings(25_000, 31, 'expired');
    await addWarnings(3, 29, 'kept');
    expect(await pruneWarnings(pool, 0)).toBe(0);
    expect(await remaining()).toEqual({ expired: 25_000, kept: 3 });
    // At most 10 statements of 1,000 rows: a call never runs away with a large backlog.
    expect(await pruneWarnings(pool, 30 * DAY, 1_000, 10)).toBe(10_000);
    // Two workers prune at once: each row goes once, and together they finish.
    const [a, b] = await Promise.all([pruneWarnings(pool, 30 * DAY), pruneWarnings(pool, 30 * DAY)]);
    expect(a + b).toBe(15_000);
    expect(await remaining()).toEqual({ kept: 3 });
    expect(await pruneWarnings(pool, 30 * DAY)).toBe(0);
  });
});
