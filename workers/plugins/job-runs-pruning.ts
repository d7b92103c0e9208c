// plugin_job_runs holds a row for each job request a holder took up, so that a request read again
// (a new holder reads PLUGIN_JOBS from the start) is not run again. A request leaves PLUGIN_JOBS
// after the stream's max_age (PIPELINE_REQUEST_MAX_AGE, 7 days by default); its finished row is
// kept that long plus an hour (clocks differ), then deleted. Every worker with the plugins role
// prunes hourly: the DELETE is the same whoever runs it.
import type { JetStreamManager } from '@nats-io/jetstream';
import type pg from 'pg';
import { PIPELINE_STREAMS, type Logger } from '../../lib/index.js';
import { errorText } from '../coordination/index.js';

const MARGIN_MS = 3_600_000;
const EVERY_MS = 3_600_000;

/** Deletes the finished job runs whose requests PLUGIN_JOBS no longer holds; returns how many. */
export async function pruneJobRuns(db: pg.Pool, jsm: JetStreamManager): Promise<number> {
  const { config } = await jsm.streams.info(PIPELINE_STREAMS.pluginJobs.name);
  // 0: the stream keeps requests for ever, and so every row is still needed.
  if (!config.max_age) return 0;
  const keepMs = config.max_age / 1_000_000 + MARGIN_MS;
  const { rowCount } = await db.query('DELETE FROM plugin_job_runs WHERE finished_at IS NOT NULL AND started_at < now() - make_interval(secs => $1)', [keepMs / 1000]);
  return rowCount ?? 0;
}

/** Prunes now and every hour until stopped. */
export function startJobRunsPruning(db: pg.Pool, jsm: JetStreamManager, logger: Logger): { stop(): void } {
  const prune = () =>
    void pruneJobRuns(db, jsm).then(
      (deleted) => deleted > 0 && logger.info({ deleted }, 'old plugin job runs deleted'),
      (err: unknown) => logger.warn({ err: errorText(err) }, 'deleting old plugin job runs failed (tried again in an hour)'),
    );
  prune();
  const timer = setInterval(prune, EVERY_MS).unref();
  return { stop: () => clearInterval(timer) };
}
