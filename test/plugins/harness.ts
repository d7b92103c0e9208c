// Test rig for plugins as a user runs them: the real admin server (plugins, sources, configs and
// their logs through the API), real nats-server and PostgreSQL, and an in-process worker on the
// same NATS and database running the plugin runtime; events published as ingest does, PROCESSED
// read back.
import { type JetStreamClient } from '@nats-io/jetstream';
import type { NatsConnection } from '../../lib/index.js';
import { startWorker, type Worker, type WorkerDeps } from '../../workers/index.js';
import { startAdminFixture, type AdminFixture, type TestUser } from '../admin/harness.js';
import { waitFor } from '../kit/index.js';
import { connectAndCreateStreams, readProcessed, testDeps, workerConfig, type ProcessedLine } from '../workers/harness.js';

export interface PluginRig extends AsyncDisposable {
  f: AdminFixture;
  nc: NatsConnection;
  js: JetStreamClient;
  user: TestUser;
  worker: Worker;
  /** Another in-process worker (with the rig's worker deps unless given others). */
  startWorker(env?: Record<string, string>, deps?: WorkerDeps): Promise<Worker>;
  /** Installs a plugin in `collection` with this code, and an enabled config of it in the user's project. */
  install(
    source: string,
    options?: { collection?: string; name?: string; order?: number; config?: Record<string, unknown>; configSchema?: unknown[]; capabilities?: Record<string, unknown> },
  ): Promise<{ pluginId: number; configId: number }>;
  /** The config's log entries through the API, oldest first. */
  logs(configId: number): Promise<Array<{ source: string; type: string; message: string; instance_id: string | null }>>;
  waitForLog(configId: number, what: string, test: (l: { source: string; type: string; message: string }) => boolean, timeoutMs?: number): Promise<void>;
  config(configId: number): Promise<{ enabled: boolean }>;
  /** PROCESSED lines of the user's project, waiting until there are at least `n`. */
  processed(n: number, timeoutMs?: number): Promise<ProcessedLine[]>;
  stop(): Promise<void>;
}

export const FAST_PLUGINS = {
  PLUGIN_CPU_TIMEOUT: '100ms',
  PLUGIN_WALL_TIMEOUT: '3s',
  PLUGIN_SETUP_BACKOFF: '200ms',
  PLUGIN_EGRESS_ALLOW: 'loopback',
};

/**
 * `workerDeps`: what the rig's workers get besides the test logger (e.g. a shortened task clock);
 * `natsMaxPayload`: the nats-server's max_payload (8 MiB unless given).
 */
export async function startPluginRig(env: Record<string, string> = {}, workerDeps: WorkerDeps = {}, options: { natsMaxPayload?: number } = {}): Promise<PluginRig> {
  const f = await startAdminFixture({}, options);
  const { nc, js } = await connectAndCreateStreams(f.nats.url);
  const user = await f.newUser(`plugins-${Math.random().toString(36).slice(2)}@plugins.example`);
  // Installing plugins needs plugins_access_level 6 (docs/admin-api.md).
  await f.db.query('update organizations set plugins_access_level = 9 where id = $1', [user.organizationId]);
  const workers: Worker[] = [];
  const spawn = async (extra: Record<string, string> = {}, deps: WorkerDeps = workerDeps) => {
    const w = await startWorker(workerConfig(f.nats.url, f.databaseUrl, { ...FAST_PLUGINS, ...env, ...extra }), testDeps(deps));
    workers.push(w);
    return w;
  };
  const worker = await spawn();
  const org = `/api/organizations/${user.organizationId}`;
  const configs = `/api/projects/${user.projectId}/plugin_configs/`;

  const logs = async (configId: number) => {
    const res = await f.api('GET', `${configs}${configId}/logs/?limit=1000`, { key: user.key });
    if (res.status !== 200) throw new Error(`logs: ${res.status} ${res.text}`);
    return (res.body.results as Array<{ source: string; type: string; message: string; instance_id: string | null }>).reverse();
  };
  const stop = async () => {
    for (const w of workers.splice(0)) await w.stop().catch(() => undefined);
    await nc.close().catch(() => undefined);
    await f.stop();
  };
  return {
    f,
    nc,
    js,
    user,
    worker,
    startWorker: spawn,
    async install(source, options = {}) {
      const collection = options.collection ?? 'pipeline_transformations';
      const created = await f.api('POST', `${org}/${collection}/`, {
        key: user.key,
        body: { plugin_type: 'source', name: options.name ?? 'Test plugin', config_schema: options.configSchema ?? [], ...(options.capabilities ? { capabilities: options.capabilities } : {}) },
      });
      if (created.status !== 201) throw new Error(`create plugin: ${created.status} ${created.text}`);
      const saved = await f.api('PATCH', `${org}/${collection}/${created.body.id}/update_source/`, { key: user.key, body: { 'index.ts': source } });
      if (saved.status !== 200) throw new Error(`update_source: ${saved.status} ${saved.text}`);
      const config = await f.api('POST', configs, { key: user.key, body: { plugin: created.body.id, order: options.order ?? 1, enabled: true, config: options.config ?? {} } });
      if (config.status !== 201) throw new Error(`create config: ${config.status} ${config.text}`);
      return { pluginId: created.body.id as number, configId: config.body.id as number };
    },
    logs,
    async waitForLog(configId, what, test, timeoutMs = 20_000) {
      await waitFor(what, async () => (await logs(configId)).some(test), timeoutMs, 200);
    },
    async config(configId) {
      return (await f.api('GET', `${configs}${configId}/`, { key: user.key })).body as { enabled: boolean };
    },
    async processed(n, timeoutMs = 20_000) {
      let lines: ProcessedLine[] = [];
      await waitFor(
        `${n} processed events`,
        async () => {
          lines = (await readProcessed(nc)).filter((l) => l.project_id === user.projectId);
          return lines.length >= n;
        },
        timeoutMs,
        200,
      );
      return lines;
    },
    stop,
    [Symbol.asyncDispose]: stop,
  };
}
