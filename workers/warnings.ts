// Ingestion warnings: stored per project in `ingestion_warnings` (type, details, time) for
// WORKER_WARNING_RETENTION and counted in /metrics. The first three types are PostHog's names
// (reference §6); the rest are Spate's.
import type pg from 'pg';

export const WARNING_TYPES = [
  'cannot_merge_with_illegal_distinct_id',
  'cannot_merge_already_identified',
  'invalid_event_when_process_person_profile_is_false',
  'invalid_process_person_profile',
  'missing_required_property',
  'invalid_group_key',
  'invalid_group_set',
  'group_type_limit_reached',
  'invalid_event',
] as const;

export type WarningType = (typeof WARNING_TYPES)[number];

/** Rows deleted per statement: each delete stays short, so it never holds up batches for long. */
const PRUNE_CHUNK = 10_000;

/**
 * Deletes warnings older than `retentionMs` (0: keep them all) and returns how many. One bad
 * client can cause a warning per event, so without this the table grows with every one of them.
 * Workers run it side by side: both pick the same oldest rows (a total order), one deletes them
 * and the other finds none and stops; the winner goes on to the end.
 */
export async function pruneWarnings(pool: pg.Pool, retentionMs: number, now = Date.now()): Promise<number> {
  if (retentionMs <= 0) return 0;
  const cutoff = new Date(now - retentionMs);
  let deleted = 0;
  for (;;) {
    const { rowCount } = await pool.query(
      `DELETE FROM ingestion_warnings WHERE id IN (
         SELECT id FROM ingestion_warnings WHERE created_at < $1 ORDER BY created_at, id LIMIT ${PRUNE_CHUNK})`,
      [cutoff],
    );
    deleted += rowCount ?? 0;
    if ((rowCount ?? 0) < PRUNE_CHUNK) return deleted;
  }
}
