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
  'event_processing_failed',
  'person_properties_too_large',
  'group_properties_too_large',
] as const;

export type WarningType = (typeof WARNING_TYPES)[number];

/**
 * Deletes warnings older than `retentionMs` (0: keep them all), oldest first, `chunkRows` per
 * statement (short transactions, little WAL and vacuum work at a time) and at most `maxChunks`
 * statements per call (the next call goes on); returns how many. One bad client can cause a
 * warning per event, so without this the table grows with every one of them.
 * Ids follow insertion, so the oldest rows are found through the primary key: no index on time
 * (building one would block a large table's inserts) and no scan of the table. Workers prune side
 * by side: both pick the same oldest ids, one deletes them and the other finds none and stops.
 */
export async function pruneWarnings(pool: pg.Pool, retentionMs: number, chunkRows = 10_000, maxChunks = 100): Promise<number> {
  if (retentionMs <= 0) return 0;
  let deleted = 0;
  for (let chunk = 0; chunk < maxChunks; chunk++) {
    // The database's clock, the one created_at was set by. ANY(ARRAY(…)): the ids are looked up
    // one by one, where IN (…) may be planned as a hash over the whole table.
    const { rowCount } = await pool.query(
      `DELETE FROM ingestion_warnings
        WHERE id = ANY(ARRAY(SELECT id FROM ingestion_warnings ORDER BY id LIMIT $2))
          AND created_at < now() - make_interval(secs => $1)`,
      [retentionMs / 1000, chunkRows],
    );
    deleted += rowCount ?? 0;
    if ((rowCount ?? 0) < chunkRows) break;
  }
  return deleted;
}
