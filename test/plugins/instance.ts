// One real plugin instance outside a worker (its sandbox, its logs on the given nats-server, fetch
// to loopback), for tests of the instance and of what runs on it.
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type pg from 'pg';
import { compilePluginSource, createLogger, parseNdjson, PIPELINE_STREAMS, Registry, type NatsConnection, type PluginLogLine } from '../../lib/index.js';
import { pluginEgressPolicy } from '../../workers/plugins/host-ops.js';
import { PluginInstance, type PluginConfigEntry } from '../../workers/plugins/instance.js';
import { PluginLogs } from '../../workers/plugins/logs.js';
import { createPluginMetrics, type PluginMetrics } from '../../workers/plugins/metrics.js';
import { testSecretKeyring } from '../kit/index.js';

export interface TestInstance {
  instance: PluginInstance;
  entry: PluginConfigEntry;
  logs: PluginLogs;
  metrics: PluginMetrics;
  stop: () => Promise<void>;
}

/** Config 1 of plugin "Test" in project 1 running `source`; 8 MiB of memory, 10 s of CPU. Uses no storage or cache. */
export async function startTestInstance(nc: NatsConnection, source: string, config: Record<string, unknown> = {}): Promise<TestInstance> {
  const compiled = (await compilePluginSource(new Map([['index.ts', source]])))!;
  const logger = createLogger('test', 'silent');
  const logs = new PluginLogs(jetstream(nc), { ratePerSecond: 100 }, logger);
  const metrics = createPluginMetrics(new Registry(), () => new Map());
  const entry: PluginConfigEntry = {
    id: 1,
    plugin_id: 1,
    order: 1,
    config,
    plugin: { name: 'Test', plugin_type: 'source', url: null, tag: null, capabilities: {}, updated_at: '2026-01-01T00:00:00Z', source_hash: compiled.hash },
    updated_at: '2026-01-01T00:00:00Z',
  };
  const instance = new PluginInstance(1, entry, {
    nc,
    logs,
    db: undefined as unknown as pg.Pool,
    egress: pluginEgressPolicy('loopback'),
    keyring: testSecretKeyring(),
    limits: { memoryBytes: 8 * 1024 * 1024, stackBytes: 512 * 1024, cpuMs: 10_000, wallMs: 30_000 },
    setup: { attempts: 1, backoffMs: 100 },
    breaker: { failures: 0, of: 100, timeouts: 0 },
    logger,
    metrics,
    code: () => Promise.resolve(compiled.code),
  });
  return { instance, entry, logs, metrics, stop: async () => (await instance.stop(), await logs.stop()) };
}

/** Every log line on PLUGIN_LOGS for config `configId`, in order. */
export async function storedLogLines(nc: NatsConnection, configId: number): Promise<PluginLogLine[]> {
  const jsm = await jetstreamManager(nc);
  const info = await jsm.streams.info(PIPELINE_STREAMS.pluginLogs.name);
  const out: PluginLogLine[] = [];
  for (let seq = info.state.first_seq; seq <= info.state.last_seq && info.state.messages > 0; seq++) {
    const m = await jsm.streams.getMessage(PIPELINE_STREAMS.pluginLogs.name, { seq }).catch(() => null);
    if (m && m.subject.endsWith(`.${configId}`)) out.push(...parseNdjson<PluginLogLine>(m.data));
  }
  return out;
}
