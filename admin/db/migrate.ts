// Applies the admin schema migrations (node-pg-migrate) with their own bookkeeping table.
// Several admin replicas (and CLI commands) may start at once: each waits for one advisory
// lock, so exactly one applies pending migrations and the others then find nothing to do.
import { fileURLToPath, pathToFileURL } from 'node:url';
import { runner, type MigrationBuilder } from 'node-pg-migrate';
import type { Logger } from '../../lib/index.js';

export const MIGRATIONS_TABLE = 'admin_migrations';
/** Our own lock id: node-pg-migrate's default one is shared with the workers' migrations. */
export const MIGRATION_LOCK_ID = 5_370_617_465_001;

const migrationsDir = fileURLToPath(new URL('./migrations/', import.meta.url));

interface MigrationModule {
  up: (pgm: MigrationBuilder) => void | Promise<void>;
  down?: (pgm: MigrationBuilder) => void | Promise<void>;
}

/**
 * Returns the names of the migrations applied by this call (empty when up to date). `count`
 * applies only that many pending ones (tests of the upgrade path use it).
 */
export async function migrate(databaseUrl: string, log?: Logger, options: { count?: number } = {}): Promise<string[]> {
  const applied = await runner({
    ...(options.count === undefined ? {} : { count: options.count }),
    databaseUrl,
    dir: migrationsDir,
    // Built code has .js.map (and tests) beside the migrations; only migrations are loaded.
    ignorePattern: '(?:\\..*|.*\\.map|.*\\.d\\.ts|.*\\.test\\.[jt]s)',
    migrationsTable: MIGRATIONS_TABLE,
    direction: 'up',
    singleTransaction: true,
    checkOrder: true,
    lockValue: MIGRATION_LOCK_ID,
    advisoryLockMode: 'wait',
    // Native import (through tsx or vitest for .ts sources, plain Node for built .js).
    migrationLoaderStrategies: [
      {
        extensions: ['.ts', '.js'],
        loader: async (paths) =>
          Promise.all(
            paths.map(async (path) => {
              const mod = (await import(pathToFileURL(path).href)) as MigrationModule;
              return { id: path, filePaths: [path], actions: { up: mod.up, down: mod.down ?? false } };
            }),
          ),
      },
    ],
    logger: {
      debug: () => undefined,
      info: (msg: string) => log?.debug({ migrations: true }, msg),
      warn: (msg: string) => log?.warn({ migrations: true }, msg),
      error: (msg: string) => log?.error({ migrations: true }, msg),
    },
  });
  const names = applied.map((m) => m.name);
  if (names.length > 0) log?.info({ migrations: names }, 'applied admin migrations');
  return names;
}
