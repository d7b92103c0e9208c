// One plugin instance's lifecycle (workers/plugins/instance.ts) with its real sandbox, its logs on a
// real nats-server and its fetch to a real local HTTP server.
import { setTimeout as sleep } from 'node:timers/promises';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compilePluginSource, createLogger, ensurePipelineStreams, Registry, type NatsConnection } from '../../lib/index.js';
import { startHttpSink, startNats, testSecretKeyring, waitFor, type NatsHandle } from '../../test/kit/index.js';
import { pluginEgressPolicy } from './host-ops.js';
import { PluginInstance, type PluginConfigEntry } from './instance.js';
import { PluginLogs } from './logs.js';
import { createPluginMetrics } from './metrics.js';
import type { Sandbox } from './sandbox/index.js';

let nats: NatsHandle;
let nc: NatsConnection;

beforeAll(async () => {
  nats = await startNats();
  nc = await nats.connect('plugin-instance-test');
  await ensurePipelineStreams(await jetstreamManager(nc), { replicas: 1, maxBytes: -1, requestMaxAgeMs: 0, duplicateWindowMs: 2 * 60_000 });
});
afterAll(async () => {
  await nc?.close();
  await nats?.stop();
});

async function instanceOf(source: string, config: Record<string, unknown>) {
  const compiled = (await compilePluginSource(new Map([['index.ts', source]])))!;
  const logger = createLogger('test', 'silent');
  const logs = new PluginLogs(jetstream(nc), { ratePerSecond: 100 }, logger);
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
    // This plugin uses neither storage nor cache.
    db: undefined as unknown as pg.Pool,
    egress: pluginEgressPolicy('loopback'),
    keyring: testSecretKeyring(),
    limits: { memoryBytes: 8 * 1024 * 1024, stackBytes: 512 * 1024, cpuMs: 10_000, wallMs: 30_000 },
    setup: { attempts: 1, backoffMs: 100 },
    breaker: { failures: 0, of: 100, timeouts: 0 },
    logger,
    metrics: createPluginMetrics(new Registry(), () => new Map()),
    code: () => Promise.resolve(compiled.code),
  });
  return { instance, logs };
}

const event = (name: string) => ({ uuid: '00000000-0000-4000-8000-000000000001', event: name, distinct_id: 'u1', properties: {}, timestamp: '2026-01-01T00:00:00Z' });

describe('plugin instance', () => {
  it('instance - an engine replaced while a batch is in flight, then stopped: the old engine is freed too', async () => {
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    await using sink = await startHttpSink(async () => (await gate, 200));
    const { instance, logs } = await instanceOf(
      `const kept: object[] = []
      export async function processEvent(event, { config }) {
        if (event.event === 'slow') await fetch(config.url)
        if (event.event === 'hog') for (;;) kept.push({ n: kept.length, list: [kept.length, 'item ' + kept.length] })
        return event
      }`,
      { url: `${sink.url}/slow` },
    );
    try {
      expect(await instance.ready()).toBe(true);
      const old = (instance as unknown as { sandbox: Sandbox }).sandbox;
      // A batch waits on its fetch; another runs out of memory: the engine is replaced once the first is done.
      const slow = instance.runBatch('processEvent', 'event', { teamId: 1, events: [event('slow')] }).catch(() => undefined);
      await waitFor('the fetch to arrive', () => sink.requests.length === 1);
      await instance.runBatch('processEvent', 'event', { teamId: 1, events: [event('hog')] });
      expect(instance.state).toBe('starting');
      expect(await instance.ready()).toBe(true);
      // Stopped (config changed or the worker stops) while the first batch is still in flight.
      const stopped = instance.stop();
      await sleep(300);
      expect(old.disposed).toBe(false);
      open();
      await slow;
      await stopped;
      expect(old.disposed).toBe(true);
    } finally {
      open();
      await instance.stop();
      await logs.stop();
    }
  });
});
