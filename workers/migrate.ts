// The workers' schema, applied at start. Several workers start at once: node-pg-migrate waits on
// a Postgres advisory lock of our own (not the admin server's), so one applies and the rest see
// nothing left to do. Migrations are tracked in `worker_migrations`.
import { fileURLToPath } from 'node:url';
import { runner } from 'node-pg-migrate';
import pg from 'pg';
import type { Logger } from '../lib/index.js';

export const WORKER_MIGRATIONS_TABLE = 'worker_migrations';
/** Advisory lock id of worker migrations (any fixed number other services do not use). */
export const WORKER_MIGRATION_LOCK = 7_370_617_465_001;

/** The oldest PostgreSQL the workers run on: dedup generations are detached CONCURRENTLY (14). */
const MIN_SERVER_VERSION_NUM = 140_000;

/** Why the workers cannot use this server, or undefined when they can. */
export function serverVersionProblem(versionNum: number, version: string): string | undefined {
  if (versionNum >= MIN_SERVER_VERSION_NUM) return undefined;
  return `PostgreSQL ${version} is too old for the workers: 14 or newer is needed (DETACH PARTITION … CONCURRENTLY)`;
}

export async function migrateWorkerSchema(databaseUrl: string, logger: Logger): Promise<string[]> {
  const client = new pg.Client({ connectionString: databaseUrl });
  try {
    await client.connect();
    const { rows } = await client.query<{ num: string; version: string }>(
      "SELECT current_setting('server_version_num') AS num, current_setting('server_version') AS version",
    );
    const problem = serverVersionProblem(Number(rows[0]!.num), rows[0]!.version);
    if (problem) throw new Error(problem);
  } finally {
    await client.end().catch(() => undefined);
  }
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
