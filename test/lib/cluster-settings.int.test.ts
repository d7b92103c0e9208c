// ensureClusterSettings against a real nats-server: concurrent first starts agree on one record,
// and a create the server refuses for a reason other than "exists" fails at once, clearly.
import { Kvm } from '@nats-io/kv';
import { afterEach, describe, expect, it } from 'vitest';
import {
  CLUSTER_BUCKET,
  ClusterSettingsMismatch,
  ClusterSettingsUnwritable,
  connectNats,
  ensureClusterSettings,
  type NatsConnection,
} from '../../lib/index.js';
import { startNats, type NatsHandle } from '../kit/index.js';

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
    const results = await Promise.all(Array.from({ length: 5 }, () => ensureClusterSettings(conn, { shardCount: 8 }, 1)));
    expect(results).toEqual(Array.from({ length: 5 }, () => ({ shardCount: 8 })));
    await expect(ensureClusterSettings(conn, { shardCount: 16 }, 1)).rejects.toThrow(ClusterSettingsMismatch);
  });

  it('cluster settings - a create the server refuses (not "exists") fails at once with a clear error', async () => {
    const conn = await connect();
    // A bucket made beforehand whose values may hold 4 bytes: the server refuses the settings.
    await new Kvm(conn).create(CLUSTER_BUCKET, { history: 1, maxValueSize: 4 });
    const started = Date.now();
    const err: unknown = await ensureClusterSettings(conn, { shardCount: 8 }, 1).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ClusterSettingsUnwritable);
    expect(String(err)).toMatch(/could not record the cluster settings in KV bucket spate-cluster \(key settings\): .*message size/i);
    expect(Date.now() - started).toBeLessThan(2_000);
  }, 10_000);
});
