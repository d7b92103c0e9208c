// The worker's PostgreSQL pool, and which failures mean "wait and try again".
import pg from 'pg';
import type { Logger } from '../../lib/index.js';

export function createPool(databaseUrl: string, size: number, logger: Logger): pg.Pool {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: size,
    connectionTimeoutMillis: 5_000,
    idleTimeoutMillis: 30_000,
    application_name: 'spate-worker',
    // A lock held by a stalled peer must not stall this worker forever; the batch is retried.
    // No parallel query: a batch's statements read only its keys, and each shard has a session of
    // its own already. Left on, PostgreSQL forked parallel workers for batch statements once the
    // tables were large: the worker bench's PostgreSQL CPU per event was 20.7 µs with them, 12 without.
    options:
      '-c lock_timeout=15000 -c statement_timeout=60000 -c idle_in_transaction_session_timeout=120000 -c max_parallel_workers_per_gather=0',
  });
  // A client whose server went away (restart) emits 'error'; without a listener it would crash the
  // process. Idle clients report through the pool, checked-out ones through their own listener
  // (the query in flight fails too, and the batch is retried).
  pool.on('error', (err) => logger.warn({ err: err.message }, 'postgres connection lost (idle client)'));
  pool.on('connect', (client) => {
    client.on('error', (err) => logger.warn({ err: err.message }, 'postgres connection lost'));
  });
  return pool;
}

/**
 * Starts a batch's transaction. Its statements look up a batch's keys in tables that grow without
 * bound (persons, distinct ids, dedup): only index lookups keep a batch's cost proportional to the
 * batch, so sequential scans are priced out (still used where nothing else can run a statement).
 * Hash and merge joins stay: dedup's exact query joins two sets of the batch's own rows with them.
 */
export async function beginBatch(client: pg.ClientBase): Promise<void> {
  // One round trip: a query without parameters may hold several statements.
  await client.query('BEGIN; SET LOCAL enable_seqscan = off');
}

const TRANSIENT_SQLSTATE = new Set([
  '40001', // serialization_failure
  '40P01', // deadlock_detected
  '55P03', // lock_not_available (lock_timeout)
  '57014', // query_canceled (statement_timeout)
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now
  '53300', // too_many_connections
]);

/** True for failures that say nothing about the batch itself: retrying later will succeed. */
export function isTransientDbError(err: unknown): boolean {
  const e = err as { code?: string; message?: string } | undefined;
  if (!e) return false;
  if (typeof e.code === 'string') {
    if (TRANSIENT_SQLSTATE.has(e.code) || e.code.startsWith('08')) return true;
    if (['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTCONN', 'EHOSTUNREACH'].includes(e.code)) return true;
  }
  return /Connection terminated|connection timeout|Client has encountered a connection error|timeout exceeded when trying to connect|Client was closed/i.test(
    e.message ?? '',
  );
}

/** Conflicts with a concurrent writer (another shard touched the same rows): redo the batch on fresh state. */
export function isConflictDbError(err: unknown): boolean {
  const code = (err as { code?: string } | undefined)?.code;
  return code === '23505' || code === '40P01' || code === '40001';
}

/**
 * A PostgreSQL array literal of values that never need quoting or escaping (numbers, uuids that
 * passed isUuid): one join, where pg's generic array encoding escapes element by element (a
 * visible share of a worker's CPU with thousands of uuids per batch).
 */
export function plainArrayLiteral(values: readonly (number | string)[]): string {
  return `{${values.join(',')}}`;
}
