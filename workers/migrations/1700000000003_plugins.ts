// The plugin runtime's state (docs/plugins.md): meta.storage (persistent, per plugin config) and
// meta.cache (values with an optional expiry, per plugin config; unlogged: a cache may be lost
// in a PostgreSQL crash, never half-written).
import type { MigrationBuilder } from 'node-pg-migrate';

export function up(pgm: MigrationBuilder): void {
  pgm.sql(`
    CREATE TABLE plugin_storage (
      plugin_config_id integer NOT NULL,
      key text NOT NULL,
      value jsonb NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (plugin_config_id, key)
    );
    CREATE UNLOGGED TABLE plugin_cache (
      plugin_config_id integer NOT NULL,
      key text NOT NULL,
      value jsonb NOT NULL,
      expires_at timestamptz,
      PRIMARY KEY (plugin_config_id, key)
    );
    CREATE INDEX plugin_cache_expires ON plugin_cache (expires_at) WHERE expires_at IS NOT NULL;
  `);
}

export function down(pgm: MigrationBuilder): void {
  pgm.sql('DROP TABLE plugin_cache; DROP TABLE plugin_storage;');
}
