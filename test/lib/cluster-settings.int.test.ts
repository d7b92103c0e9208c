// ensureClusterSettings against a real nats-server: concurrent first starts agree on one record,
// a server that does not answer for a while is waited for, and a create the server refuses for a
// reason other than "exists" fails at once, clearly.
import { Kvm } from '@nats-io/kv';
import { afterEach, describe, expect, it } from 'vitest';
import {
  CLUSTER_BUCKET,
  ClusterSettingsMismatch,
  ClusterSettingsUnwritable,
  connectNats,
  createLogger,
  ensureClusterSettings,
  type NatsConnection,
} from '../../lib/index.js';
import { startNats, type NatsHandle } from '../kit/index.js';

const logger = createLogger('cluster-settings-test', 'silent');

let nats: NatsHandle | undefined;
let nc: NatsConnection | undefined;
afterEach(async () => {
  await nc?.close();
  await nats?.stop();
  nc = undefined;
  nats = undefined;
});

async function connect(): Promise<NatsConnection> {
  nats = await startNats();
  nc = await connectNats(nats.url, 'cluster-settings-test');
  return nc;
}

describe('cluster settings', () => {
  it('cluster settings - concurrent first starts record one shard count; a different one is refused', async () => {
    const conn = await connect();
    const results = await Promise.all(Array.from({ length: 5 }, () => ensureClusterSettings(conn, { shardCount: 8 }, 1, logger)));
    expect(results).toEqual(Array.from({ length: 5 }, () => ({ shardCount: 8 })));
    await expect(ensureClusterSettings(conn, { shardCount: 16 }, 1, logger)).rejects.toThrow(ClusterSettingsMismatch);
  });

  it('cluster settings - a server that stops answering for longer than a request timeout is waited for', async () => {
    const conn = await connect();
    const pid = nats!.node.pid!;
    // A stopped process keeps its sockets: requests wait in the kernel, as with a server starved of
    // CPU, and the first one times out (5 s) before the server reads it.
    process.kill(pid, 'SIGSTOP');
    const resume = setTimeout(() => process.kill(pid, 'SIGCONT'), 6_000);
    try {
      const started = Date.now();
      await expect(ensureClusterSettings(conn, { shardCount: 8 }, 1, logger)).resolves.toEqual({ shardCount: 8 });
      expect(Date.now() - started).toBeGreaterThanOrEqual(5_000);
      const entry = await (await new Kvm(conn).open(CLUSTER_BUCKET)).get('settings');
      expect(entry?.json()).toEqual({ shardCount: 8 });
    } finally {
      clearTimeout(resume);
      process.kill(pid, 'SIGCONT');
    }
  }, 30_000);

  it('cluster settings - a create the server refuses (not "exists") fails at once with a clear error', async () => {
    const conn = await connect();
    // A bucket made beforehand whose values may hold 4 bytes: the server refuses the settings.
    await new Kvm(conn).create(CLUSTER_BUCKET, { history: 1, maxValueSize: 4 });
    const started = Date.now();
    const err: unknown = await ensureClusterSettings(conn, { shardCount: 8 }, 1, logger).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ClusterSettingsUnwritable);
    expect(String(err)).toMatch(/could not read or record the cluster settings in KV bucket spate-cluster \(key settings\): .*message size/i);
    expect(Date.now() - started).toBeLessThan(2_000);
  }, 10_000);
});
