// Starts the shared PostgreSQL server once per `vitest run`.
import type { TestProject } from 'vitest/node';
import { startPostgres } from './postgres.js';

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const pg = await startPostgres();
  project.provide('postgresPort', pg.server.port);
  project.provide('postgresDataDir', pg.server.options.dataDir);
  return () => pg.stop();
}
