// $SPATE_DATA_DIR/cluster.json: how operators, the CLI and outside tests find a running
// cluster (public contract, ARCHITECTURE.md "Commands").
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { z } from 'zod';

export const PROCESS_ROLES = ['nats', 'postgres', 'admin', 'ingest', 'worker'] as const;

export const clusterFileSchema = z.object({
  captureUrl: z.string(),
  adminUrl: z.string().optional(),
  natsUrl: z.string(),
  /** The operator NATS user (full access), for tools and tests. */
  natsUser: z.string().optional(),
  natsPassword: z.string().optional(),
  databaseUrl: z.string().optional(),
  organizationId: z.string().optional(),
  projectId: z.number().int(),
  projectApiKey: z.string(),
  personalApiKey: z.string().optional(),
  processes: z
    .array(z.looseObject({ role: z.enum(PROCESS_ROLES), pid: z.number().int() }))
    .optional(),
});

export type ClusterFile = z.infer<typeof clusterFileSchema>;

export function dataDir(env: NodeJS.ProcessEnv = process.env): string {
  return resolve(env.SPATE_DATA_DIR || '.data');
}

export function clusterFilePath(dir = dataDir()): string {
  return join(dir, 'cluster.json');
}

export function readClusterFile(path = clusterFilePath()): ClusterFile {
  return clusterFileSchema.parse(JSON.parse(readFileSync(path, 'utf8')));
}

/** Written atomically (temp file + rename) so readers never see half a file. */
export function writeClusterFile(contents: ClusterFile, path = clusterFilePath()): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(contents, null, 2) + '\n', { mode: 0o600 });
  renameSync(tmp, path);
}
