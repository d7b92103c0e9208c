// ensureClusterSettings against a real nats-server: concurrent first starts agree on one record,
// a server that does not answer for a while is waited for, and a create the server refuses for a
// reason other than "exists" fails at once, clearly.
import { Kvm } from '@nats-io/kv';
import { afterEach, describe, expect, it } from 'vitest';
import {
  CLUSTER_BUCKET,
  ClusterSettingsMismatch,
  ClusterSettingsUnwritable,
  createLogger,
  ensureClusterSettings,
  readClusterSettings,
  recordedStreamLayout,
  type ClusterStreamSettings,
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
  nc = await nats.connect('cluster-settings-test');
  return nc;
}

const streams: ClusterStreamSettings = {
  replicas: 1,
  maxAgeMs: 7 * 86_400_000,
  maxBytes: -1,
  duplicateWindowMs: 120_000,
  historicalDuplicateWindowMs: 3_600_000,
  processedDuplicateWindowMs: 3_600_000,
};

async function recorded(conn: NatsConnection): Promise<unknown> {
  return (await (await new Kvm(conn).open(CLUSTER_BUCKET)).get('settings'))?.json();
}

describe('cluster settings', () => {
  it('cluster settings - the first ingest node records the stream limits; a node with other limits is refused, the record kept', async () => {
    const conn = await connect();
    await expect(ensureClusterSettings(conn, { shardCount: 8, streamPartitions: 1, streams }, 1, logger)).resolves.toEqual({ shardCount: 8, streamPartitions: 1, streams });
    const err: unknown = await ensureClusterSettings(conn, { shardCount: 8, streamPartitions: 1, streams: { ...streams, maxAgeMs: 3_600_000, replicas: 3 } }, 1, logger).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ClusterSettingsMismatch);
    expect(String(err)).toContain('STREAM_REPLICAS is 3 here but 1 in the cluster; STREAM_MAX_AGE is 1h here but 7d in the cluster');
    expect(String(err)).toContain('STREAM_LIMITS_UPDATE=true');
    // Workers check the shard count only; the same limits again pass.
    await expect(ensureClusterSettings(conn, { shardCount: 8, streamPartitions: 1 }, 1, logger)).resolves.toEqual({ shardCount: 8, streamPartitions: 1, streams });
    await expect(ensureClusterSettings(conn, { shardCount: 8, streamPartitions: 1, streams: { ...streams } }, 1, logger)).resolves.toEqual({ shardCount: 8, streamPartitions: 1, streams });
    expect(await recorded(conn)).toEqual({ shardCount: 8, streamPartitions: 1, streams });
  });

  it('cluster settings - a record without stream limits (made by a worker or an older version) gets them from the first ingest node', async () => {
    const conn = await connect();
    await ensureClusterSettings(conn, { shardCount: 8, streamPartitions: 1 }, 1, logger);
    expect(await recorded(conn)).toEqual({ shardCount: 8, streamPartitions: 1 });
    await ensureClusterSettings(conn, { shardCount: 8, streamPartitions: 1, streams }, 1, logger);
    expect(await recorded(conn)).toEqual({ shardCount: 8, streamPartitions: 1, streams });
    await expect(ensureClusterSettings(conn, { shardCount: 8, streamPartitions: 1, streams: { ...streams, maxBytes: 1024 } }, 1, logger)).rejects.toThrow(/STREAM_MAX_BYTES is 1024 here but -1/);
  });

  it('cluster settings - replaceStreams (STREAM_LIMITS_UPDATE) changes the recorded limits on purpose; never the shard count', async () => {
    const conn = await connect();
    await ensureClusterSettings(conn, { shardCount: 8, streamPartitions: 1, streams }, 1, logger);
    const longer = { ...streams, maxAgeMs: 30 * 86_400_000 };
    await expect(ensureClusterSettings(conn, { shardCount: 8, streamPartitions: 1, streams: longer, replaceStreams: true }, 1, logger)).resolves.toEqual({ shardCount: 8, streamPartitions: 1, streams: longer });
    expect(await recorded(conn)).toEqual({ shardCount: 8, streamPartitions: 1, streams: longer });
    await expect(ensureClusterSettings(conn, { shardCount: 8, streamPartitions: 1, streams }, 1, logger)).rejects.toThrow(ClusterSettingsMismatch);
    await expect(ensureClusterSettings(conn, { shardCount: 4, streamPartitions: 1, streams: longer, replaceStreams: true }, 1, logger)).rejects.toThrow(/SHARD_COUNT/);
  });

  it('cluster settings - ingest nodes starting at once with different limits: one set is recorded, the others refused', async () => {
    const conn = await connect();
    await ensureClusterSettings(conn, { shardCount: 8, streamPartitions: 1 }, 1, logger);
    const variants = [1, 2, 3, 4, 5].map((d) => ({ ...streams, maxAgeMs: d * 86_400_000 }));
    const results = await Promise.allSettled(variants.map((v) => ensureClusterSettings(conn, { shardCount: 8, streamPartitions: 1, streams: v }, 1, logger)));
    const won = results.filter((r) => r.status === 'fulfilled');
    expect(won).toHaveLength(1);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(ClusterSettingsMismatch);
    expect(await recorded(conn)).toEqual((won[0] as PromiseFulfilledResult<unknown>).value);
  });

  it('cluster settings - concurrent first starts record one shard count; a different one is refused', async () => {
    const conn = await connect();
    const results = await Promise.all(Array.from({ length: 5 }, () => ensureClusterSettings(conn, { shardCount: 8, streamPartitions: 1 }, 1, logger)));
    expect(results).toEqual(Array.from({ length: 5 }, () => ({ shardCount: 8, streamPartitions: 1 })));
    await expect(ensureClusterSettings(conn, { shardCount: 16, streamPartitions: 1 }, 1, logger)).rejects.toThrow(ClusterSettingsMismatch);
  });

  it('cluster settings - the stream partitions are fixed at the first start; a node with another STREAM_PARTITIONS is refused', async () => {
    const conn = await connect();
    expect(await readClusterSettings(conn)).toBeUndefined();
    await ensureClusterSettings(conn, { shardCount: 8, streamPartitions: 3 }, 1, logger);
    const err: unknown = await ensureClusterSettings(conn, { shardCount: 8, streamPartitions: 1, streams }, 1, logger).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ClusterSettingsMismatch);
    expect(String(err)).toContain('this cluster was created with 3 stream partitions but STREAM_PARTITIONS is 1; set STREAM_PARTITIONS=3');
    await expect(ensureClusterSettings(conn, { shardCount: 8, streamPartitions: 4 }, 1, logger)).rejects.toThrow(/STREAM_PARTITIONS=3/);
    await expect(ensureClusterSettings(conn, { shardCount: 8, streamPartitions: 3, streams }, 1, logger)).resolves.toEqual({ shardCount: 8, streamPartitions: 3, streams });
    const read = await readClusterSettings(conn);
    expect(read).toEqual({ shardCount: 8, streamPartitions: 3, streams });
    expect(recordedStreamLayout(read!)).toEqual({ shardCount: 8, partitions: 3 });
  });

  it('cluster settings - a record made before stream partitions existed is a cluster of single streams', async () => {
    const conn = await connect();
    const kv = await new Kvm(conn).create(CLUSTER_BUCKET, { history: 1 });
    await kv.put('settings', JSON.stringify({ shardCount: 8, streams }));
    await expect(ensureClusterSettings(conn, { shardCount: 8, streamPartitions: 3 }, 1, logger)).rejects.toThrow(/created with 1 stream partition but STREAM_PARTITIONS is 3/);
    await expect(ensureClusterSettings(conn, { shardCount: 8, streamPartitions: 1, streams }, 1, logger)).resolves.toEqual({ shardCount: 8, streams });
    expect(recordedStreamLayout((await readClusterSettings(conn))!)).toEqual({ shardCount: 8, partitions: 1 });
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
      await expect(ensureClusterSettings(conn, { shardCount: 8, streamPartitions: 1 }, 1, logger)).resolves.toEqual({ shardCount: 8, streamPartitions: 1 });
      expect(Date.now() - started).toBeGreaterThanOrEqual(5_000);
      const entry = await (await new Kvm(conn).open(CLUSTER_BUCKET)).get('settings');
      expect(entry?.json()).toEqual({ shardCount: 8, streamPartitions: 1 });
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
    const err: unknown = await ensureClusterSettings(conn, { shardCount: 8, streamPartitions: 1 }, 1, logger).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ClusterSettingsUnwritable);
    expect(String(err)).toMatch(/could not read or record the cluster settings in KV bucket spate-cluster \(key settings\): .*message size/i);
    expect(Date.now() - started).toBeLessThan(2_000);
  }, 10_000);
});
