// Ingestion warnings are kept for WORKER_WARNING_RETENTION: expired rows are found by time.
import type { MigrationBuilder } from 'node-pg-migrate';

export function up(pgm: MigrationBuilder): void {
  pgm.sql('CREATE INDEX IF NOT EXISTS ingestion_warnings_created ON ingestion_warnings (created_at)');
}

export function down(pgm: MigrationBuilder): void {
  pgm.sql('DROP INDEX IF EXISTS ingestion_warnings_created');
}
