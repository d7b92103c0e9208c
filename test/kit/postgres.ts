// Real PostgreSQL for tests. One server per test run (started in global-setup.ts); each test
// file takes a fresh database from it. Tests that restart the server start their own.
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inject } from 'vitest';
import { PostgresServer } from '../../deploy/local/postgres.js';
import { freePort } from '../../deploy/local/ports.js';

export interface PostgresHandle extends AsyncDisposable {
  server: PostgresServer;
  /** URL of the `postgres` database. */
  url: string;
  createDatabase(name?: string): Promise<string>;
  stop(): Promise<void>;
}

export async function startPostgres(): Promise<PostgresHandle> {
  const dir = mkdtempSync(join(tmpdir(), 'spate-pg-'));
  chmodSync(dir, 0o711); // the postgres user (when we are root) must reach the data dir inside
  const server = new PostgresServer({ dataDir: join(dir, 'data'), port: await freePort(), durable: false });
  await server.init();
  await server.start();
  const stop = async () => {
    await server.stop().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  };
  return {
    server,
    url: server.url(),
    createDatabase: (name = randomDatabaseName()) => server.createDatabase(name),
    stop,
    [Symbol.asyncDispose]: stop,
  };
}

function randomDatabaseName(): string {
  return `t_${randomBytes(6).toString('hex')}`;
}

/** A new, empty database on the run's shared server. */
export async function freshDatabase(): Promise<string> {
  const port = inject('postgresPort');
  const server = new PostgresServer({ dataDir: inject('postgresDataDir'), port, durable: false });
  return server.createDatabase(randomDatabaseName());
}

declare module 'vitest' {
  export interface ProvidedContext {
    postgresPort: number;
    postgresDataDir: string;
  }
}
