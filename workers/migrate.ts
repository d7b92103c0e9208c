// The workers' schema, applied at start. Several workers start at once: node-pg-migrate waits on
// a Postgres advisory lock of our own (not the admin server's), so one applies and the rest see
// nothing left to do. Migrations are tracked in `worker_migrations`.
import { fileURLToPath } from 'node:url';
import { runner } from 'node-pg-migrate';
import type { Logger } from '../lib/index.js';

export const WORKER_MIGRATIONS_TABLE = 'worker_migrations';
/** Advisory lock id of worker migrations (any fixed number other services do not use). */
export const WORKER_MIGRATION_LOCK = 7_370_617_465_001;

export async function migrateWorkerSchema(databaseUrl: string, logger: Logger): Promise<string[]> {
  const ran = await runner({
    databaseUrl,
    dir: fileURLToPath(new URL('./migrations', import.meta.url)),
    // Built code sits beside source maps and declaration files; only the modules are migrations.
    ignorePattern: '(\\..*)|(.*\\.map)|(.*\\.d\\.ts)',
    migrationsTable: WORKER_MIGRATIONS_TABLE,
    direction: 'up',
    count: Infinity,
    singleTransaction: true,
    lockValue: WORKER_MIGRATION_LOCK,
    advisoryLockMode: 'wait',
    log: (message) => logger.debug({ migrate: message }),
  });
  return ran.map((m) => m.name);
}
