// The batch-export runner's state (docs/exports.md) and what the persons model needs: when a
// person or a distinct id last changed, and a version for distinct ids.
import type { MigrationBuilder } from 'node-pg-migrate';

export function up(pgm: MigrationBuilder): void {
  pgm.sql(`
    -- now() is stable: existing rows take the migration's time without a table rewrite.
    ALTER TABLE persons ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();
    ALTER TABLE person_distinct_ids ADD COLUMN updated_at timestamptz NOT NULL DEFAULT now();
    ALTER TABLE person_distinct_ids ADD COLUMN version bigint NOT NULL DEFAULT 0;
    CREATE INDEX persons_project_updated ON persons (project_id, updated_at);
    CREATE INDEX person_distinct_ids_project_updated ON person_distinct_ids (project_id, updated_at);

    -- One row per batch export this cluster has run: where its schedule stands and the fence
    -- each new holder of its lease raises, so a former holder can no longer write.
    CREATE SEQUENCE export_fence;
    CREATE TABLE export_schedules (
      export_id uuid PRIMARY KEY,
      team_id integer NOT NULL,
      fence bigint NOT NULL DEFAULT 0,
      owner text,
      -- Start of the next scheduled interval to run (or skip, while paused).
      next_start timestamptz NOT NULL,
      -- The last scheduled run's end and last PROCESSED sequence: the next run goes on from
      -- there when it starts where that one ended.
      chain_end timestamptz,
      chain_seq bigint,
      updated_at timestamptz NOT NULL DEFAULT now()
    );

    -- Backfill requests read from BATCH_EXPORT_BACKFILLS.
    CREATE TABLE export_backfills (
      id uuid PRIMARY KEY,
      export_id uuid NOT NULL,
      start_at timestamptz NOT NULL,
      end_at timestamptz NOT NULL,
      interval_seconds integer NOT NULL,
      total_runs integer NOT NULL,
      created_at timestamptz NOT NULL,
      received_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX export_backfills_export ON export_backfills (export_id, created_at, id);

    -- Every run, scheduled or of a backfill: its plan (the PROCESSED range it reads and what it
    -- leaves to other runs) is fixed before it delivers anything, so any rerun delivers the same.
    CREATE TABLE export_runs (
      id uuid PRIMARY KEY,
      export_id uuid NOT NULL,
      backfill_id uuid,
      data_interval_start timestamptz NOT NULL,
      data_interval_end timestamptz NOT NULL,
      status text NOT NULL,
      plan jsonb,
      attempts integer NOT NULL DEFAULT 0,
      next_attempt_at timestamptz,
      records_completed bigint,
      bytes_exported bigint,
      latest_error text,
      created_at timestamptz NOT NULL DEFAULT now(),
      finished_at timestamptz,
      updated_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX export_runs_export ON export_runs (export_id, created_at);
  `);
}

export function down(pgm: MigrationBuilder): void {
  pgm.sql(`
    DROP TABLE export_runs;
    DROP TABLE export_backfills;
    DROP TABLE export_schedules;
    DROP SEQUENCE export_fence;
    DROP INDEX person_distinct_ids_project_updated;
    DROP INDEX persons_project_updated;
    ALTER TABLE person_distinct_ids DROP COLUMN version, DROP COLUMN updated_at;
    ALTER TABLE persons DROP COLUMN updated_at;
  `);
}
