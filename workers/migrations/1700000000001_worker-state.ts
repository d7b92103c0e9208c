// The workers' tables. project_id is a plain integer: the admin server owns projects in its own
// tables of the same database, and workers never join them.
import type { MigrationBuilder } from 'node-pg-migrate';

export function up(pgm: MigrationBuilder): void {
  pgm.sql(`
    CREATE TABLE persons (
      uuid uuid PRIMARY KEY,
      project_id integer NOT NULL,
      properties jsonb NOT NULL DEFAULT '{}',
      is_identified boolean NOT NULL DEFAULT false,
      created_at timestamptz NOT NULL,
      version bigint NOT NULL DEFAULT 0
    );

    CREATE TABLE person_distinct_ids (
      project_id integer NOT NULL,
      distinct_id text NOT NULL,
      person_uuid uuid NOT NULL,
      PRIMARY KEY (project_id, distinct_id)
    );
    CREATE INDEX person_distinct_ids_person ON person_distinct_ids (person_uuid);

    CREATE TABLE group_type_mappings (
      project_id integer NOT NULL,
      group_type text NOT NULL,
      group_type_index smallint NOT NULL CHECK (group_type_index BETWEEN 0 AND 4),
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (project_id, group_type),
      UNIQUE (project_id, group_type_index)
    );

    CREATE TABLE groups (
      project_id integer NOT NULL,
      group_type_index smallint NOT NULL,
      group_key text NOT NULL CHECK (char_length(group_key) <= 400),
      group_properties jsonb NOT NULL DEFAULT '{}',
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now(),
      version bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (project_id, group_type_index, group_key)
    );

    CREATE TABLE ingestion_warnings (
      id bigserial PRIMARY KEY,
      project_id integer NOT NULL,
      type text NOT NULL,
      details jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX ingestion_warnings_project_time ON ingestion_warnings (project_id, created_at DESC);

    -- Event uuids already processed, one list partition per generation (dedup window); workers
    -- create the partitions they need and drop the expired ones, so pruning costs nothing.
    CREATE TABLE event_dedup (
      generation integer NOT NULL,
      project_id integer NOT NULL,
      uuid uuid NOT NULL,
      PRIMARY KEY (generation, project_id, uuid)
    ) PARTITION BY LIST (generation);

    -- Where each (stream, shard) is: the last stream sequence whose effects are committed, the
    -- end of a batch that may have been published but not committed (replayed exactly), and a
    -- fence that each new owner raises so a former owner can no longer commit.
    CREATE SEQUENCE shard_fence;
    CREATE TABLE shard_positions (
      stream text NOT NULL,
      shard integer NOT NULL,
      position bigint NOT NULL DEFAULT 0,
      pending_end bigint,
      stream_created text,
      fence bigint NOT NULL DEFAULT 0,
      owner text,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (stream, shard)
    );
  `);
}

export function down(pgm: MigrationBuilder): void {
  pgm.sql(`
    DROP TABLE shard_positions;
    DROP SEQUENCE shard_fence;
    DROP TABLE event_dedup;
    DROP TABLE ingestion_warnings;
    DROP TABLE groups;
    DROP TABLE group_type_mappings;
    DROP TABLE person_distinct_ids;
    DROP TABLE persons;
  `);
}
