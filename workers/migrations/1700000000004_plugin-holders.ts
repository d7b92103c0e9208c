// Where each plugin config's destination, scheduled tasks and jobs stand (docs/plugins.md,
// "Destinations", "Scheduled tasks", "Jobs"). One row per config this cluster has held: the fence
// each new holder of its lease raises (a former holder can no longer write), and the delivery
// position in PROCESSED. Scheduled task slots and job runs are written only under the current
// fence (their writes lock the config's row first).
import type { MigrationBuilder } from 'node-pg-migrate';

export function up(pgm: MigrationBuilder): void {
  pgm.sql(`
    CREATE SEQUENCE plugin_holder_fence;
    CREATE TABLE plugin_holders (
      plugin_config_id integer PRIMARY KEY,
      team_id integer NOT NULL,
      fence bigint NOT NULL,
      owner text NOT NULL,
      -- PROCESSED as the position knows it (its creation time): a stream created again starts over.
      stream_created text,
      -- Every event of the project's PROCESSED messages up to delivered_seq is delivered, and
      -- the first delivered_lines events of the next one (a batch may end inside a message).
      delivered_seq bigint,
      delivered_lines integer NOT NULL DEFAULT 0,
      updated_at timestamptz NOT NULL DEFAULT now()
    );

    -- The last period each scheduled task of a config was started for (its start, UTC), and
    -- whether that run finished: a new holder neither runs it again nor skips the next one.
    CREATE TABLE plugin_task_runs (
      plugin_config_id integer NOT NULL,
      task text NOT NULL,
      slot timestamptz NOT NULL,
      started_at timestamptz,
      finished_at timestamptz,
      PRIMARY KEY (plugin_config_id, task)
    );

    -- Job requests (PLUGIN_JOBS) a holder took up: each runs once, whichever worker reads it.
    CREATE TABLE plugin_job_runs (
      job_id text PRIMARY KEY,
      plugin_config_id integer NOT NULL,
      type text NOT NULL,
      started_at timestamptz NOT NULL DEFAULT now(),
      finished_at timestamptz,
      outcome text
    );
    CREATE INDEX plugin_job_runs_config ON plugin_job_runs (plugin_config_id) WHERE finished_at IS NULL;
  `);
}

export function down(pgm: MigrationBuilder): void {
  pgm.sql('DROP TABLE plugin_job_runs; DROP TABLE plugin_task_runs; DROP TABLE plugin_holders; DROP SEQUENCE plugin_holder_fence;');
}
